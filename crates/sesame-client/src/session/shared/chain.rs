//! The chain of shared states as one device sees it: judging a state the
//! server serves against what this device saw ([`accept`]), and the note
//! of what it saw, `indexes/NAME.shared` (the sidecar).

use std::collections::BTreeMap;
use std::path::Path;

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

use super::side::Seen;
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::state::{Chain, Head};

/// `indexes/NAME.shared`: not secret (identifiers, counters, digests of
/// sealed states the server holds anyway).
#[derive(Serialize, Deserialize)]
pub(super) struct Sidecar {
    device: String,
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    #[serde(default)]
    chained: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    own: Option<HeadNote>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    heads: BTreeMap<String, HeadNote>,
}

/// A [`Head`] in the note.
#[derive(Serialize, Deserialize)]
pub(super) struct HeadNote {
    version: u64,
    digest: String,
}

impl From<&Head> for HeadNote {
    fn from(h: &Head) -> Self {
        HeadNote {
            version: h.version,
            digest: hex::encode(h.digest),
        }
    }
}

pub(super) fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    hex::decode(text).ok().and_then(|d| d.try_into().ok())
}

/// The device identifier and what it saw of the index whose sidecar is
/// `path`, and whether there was a note; a fresh identifier and nothing
/// seen when there is none.
pub(super) fn read_sidecar(path: &Path) -> Result<([u8; 16], Seen, bool)> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let (device, seen) =
                parse_sidecar(&bytes).ok_or_else(|| ClientError::ProfileCorrupt {
                    path: path.to_path_buf(),
                    reason: "not a shared-state note of this build".into(),
                })?;
            Ok((device, seen, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut device = [0u8; 16];
            rand_core::OsRng.fill_bytes(&mut device);
            Ok((device, Seen::default(), false))
        }
        Err(e) => Err(ClientError::io("read", path, &e)),
    }
}

/// The device identifier and what it saw, from the bytes of a note;
/// `None` when they are not one (also for the fuzz targets).
pub(crate) fn parse_sidecar(bytes: &[u8]) -> Option<([u8; 16], Seen)> {
    let s: Sidecar = serde_json::from_slice(bytes).ok()?;
    let head = |n: &HeadNote| -> Option<Head> {
        Some(Head {
            version: n.version,
            digest: from_hex::<32>(&n.digest)?,
        })
    };
    let mut heads = BTreeMap::new();
    for (d, n) in &s.heads {
        heads.insert(from_hex::<16>(d)?, head(n)?);
    }
    let digest = match s.digest.as_deref() {
        Some(d) => Some(from_hex::<32>(d)?),
        None => None,
    };
    let own = match &s.own {
        Some(n) => Some(head(n)?),
        None => None,
    };
    let seen = Seen {
        version: s.version,
        digest,
        chained: s.chained,
        heads,
        own,
    };
    Some((from_hex::<16>(&s.device)?, seen))
}

pub(super) fn write_sidecar(path: &Path, device: &[u8; 16], seen: &Seen) -> Result<()> {
    let json = serde_json::to_vec(&Sidecar {
        device: hex::encode(device),
        version: seen.version,
        digest: seen.digest.map(hex::encode),
        chained: seen.chained,
        own: seen.own.as_ref().map(HeadNote::from),
        heads: seen
            .heads
            .iter()
            .map(|(d, h)| (hex::encode(d), HeadNote::from(h)))
            .collect(),
    })
    .map_err(|e| ClientError::InvalidArgument(format!("shared-state note: {e}")))?;
    fsutil::write_atomic(path, &json)
}

/// The last state each device wrote, as state `version` of digest
/// `digest` at place `chain` says: its `heads`, and itself for its writer.
pub(super) fn heads_of(chain: &Chain, version: u64, digest: [u8; 32]) -> BTreeMap<[u8; 16], Head> {
    let mut heads = chain.heads.clone();
    heads.insert(chain.writer, Head { version, digest });
    heads
}

/// Judges state `version` of digest `digest` at place `chain` (`None`: a
/// state written before the chain) against what device `device` saw, and
/// gives what it will have seen once it adopts it. Refused
/// ([`ClientError::SharedStateRolledBack`],
/// [`ClientError::SharedStateForked`]): an older version than the one
/// seen; another state at the version seen; a next version not written on
/// the state seen; a state that lacks a write this device heard of (a
/// device's last write older than, or other than, the one seen) or its
/// own last write; a state without a chain once one was seen.
pub(crate) fn accept(
    index: &str,
    device: &[u8; 16],
    seen: &Seen,
    version: u64,
    digest: [u8; 32],
    chain: Option<&Chain>,
) -> Result<Seen> {
    if version < seen.version {
        return Err(ClientError::SharedStateRolledBack {
            index: index.to_owned(),
            server: version,
            seen: seen.version,
        });
    }
    let forked = |reason: String| ClientError::SharedStateForked {
        index: index.to_owned(),
        reason,
    };
    let short = |d: &[u8]| hex::encode(&d[..8]);
    if let Some(d) = seen.digest {
        if version == seen.version && d != digest {
            return Err(forked(format!(
                "the server's version {version} is state {}, this device saw state {} at that \
                 version",
                short(&digest),
                short(&d)
            )));
        }
    }
    let Some(chain) = chain else {
        if seen.chained {
            return Err(forked(format!(
                "version {version} carries no chain of states (written by an older build, or \
                 put back from before the chain began) and this device already saw a chained \
                 one"
            )));
        }
        return Ok(Seen {
            version,
            digest: Some(digest),
            chained: false,
            heads: BTreeMap::new(),
            own: seen.own,
        });
    };
    if let Some(d) = seen.digest {
        if version == seen.version + 1 && chain.prev != d {
            return Err(forked(format!(
                "version {version} was not written on state {} that this device saw at version \
                 {}",
                short(&d),
                seen.version
            )));
        }
    }
    let heads = heads_of(chain, version, digest);
    let holds = |who: &[u8; 16], h: &Head| {
        heads
            .get(who)
            .is_some_and(|n| n.version > h.version || n == h)
    };
    if let Some(own) = &seen.own {
        if !holds(device, own) {
            return Err(forked(format!(
                "version {version} lacks this device's own last write (version {}, state {})",
                own.version,
                short(&own.digest)
            )));
        }
    }
    for (who, h) in &seen.heads {
        if !holds(who, h) {
            return Err(forked(format!(
                "version {version} lacks the write of device {} (version {}, state {}) that this \
                 device saw",
                short(who),
                h.version,
                short(&h.digest)
            )));
        }
    }
    Ok(Seen {
        version,
        digest: Some(digest),
        chained: true,
        own: heads.get(device).copied().or(seen.own),
        heads,
    })
}

/// Gives the device whose note of an index is `sidecar` a fresh
/// identifier, keeping the newest version it saw (a restored backup is
/// another device than the one backed up).
pub(crate) fn renew_device(sidecar: &Path) -> Result<()> {
    let (_, mut seen, _) = read_sidecar(sidecar)?;
    let mut device = [0u8; 16];
    rand_core::OsRng.fill_bytes(&mut device);
    // The original's writes stay among those seen; this device has none.
    seen.own = None;
    write_sidecar(sidecar, &device, &seen)
}

#[cfg(test)]
mod tests {
    //! The judgement of a state against what a device saw, and the
    //! adoption of a state written before the chain.

    use super::super::{ANY_VERSION, HEAD_RECORD, INLINE, STATE_RECORD};
    use super::*;
    use crate::backend::{Backend, IndexRecordWrite};
    use crate::state::{IndexState, SharedExtras, StateCipher};

    const ME: [u8; 16] = [1; 16];
    const OTHER: [u8; 16] = [2; 16];

    /// State `version` written by `writer` on `prev` (a state `accept`
    /// took), with its digest.
    fn next(prev: &Seen, writer: [u8; 16], salt: u8) -> (u64, [u8; 32], Chain) {
        let chain = Chain {
            prev: prev.digest.unwrap_or([0; 32]),
            writer,
            heads: prev.heads.clone(),
        };
        let version = prev.version + 1;
        let mut digest = [salt; 32];
        digest[..8].copy_from_slice(&version.to_be_bytes());
        (version, digest, chain)
    }

    fn take(seen: &Seen, s: &(u64, [u8; 32], Chain)) -> Result<Seen> {
        accept("i", &ME, seen, s.0, s.1, Some(&s.2))
    }

    fn forked(r: Result<Seen>, what: &str) -> String {
        match r {
            Err(ClientError::SharedStateForked { reason, .. }) => reason,
            other => panic!("{what}: {other:?}"),
        }
    }

    #[test]
    fn a_device_takes_its_history_and_refuses_every_other() {
        // Both devices saw s1 (the other's); this device wrote s2.
        let s1 = next(&Seen::default(), OTHER, 0);
        let seen1 = take(&Seen::default(), &s1).unwrap();
        let s2 = next(&seen1, ME, 0);
        let mut seen2 = take(&seen1, &s2).unwrap();
        seen2.own = seen2.heads.get(&ME).copied();
        assert_eq!(seen2.own.map(|h| h.version), Some(2));
        // The same state again: nothing new.
        assert_eq!(take(&seen2, &s2).unwrap(), seen2);
        // The other device's next write on s2: taken.
        let s3 = next(&seen2, OTHER, 0);
        let seen3 = take(&seen2, &s3).unwrap();
        assert_eq!(seen3.own, seen2.own);

        // Forks from s1 (this device's s2 missing): at version 2, at 3
        // and further on.
        let f2 = next(&seen1, OTHER, 9);
        assert!(forked(take(&seen2, &f2), "fork at 2").contains("this device saw state"));
        let f2_seen = take(&seen1, &f2).unwrap();
        let f3 = next(&f2_seen, OTHER, 9);
        assert!(forked(take(&seen2, &f3), "fork at 3").contains("was not written on"));
        let f4 = next(&take(&f2_seen, &f3).unwrap(), OTHER, 9);
        assert!(forked(take(&seen2, &f4), "fork at 4").contains("own last write"));
        // A reader that saw s3 (another device's write after the fork
        // point) refuses a branch lacking it, also later on.
        let reader = [3; 16];
        let read = Seen {
            own: None,
            ..seen3.clone()
        };
        let g = |s: &(u64, [u8; 32], Chain)| accept("i", &reader, &read, s.0, s.1, Some(&s.2));
        assert!(forked(g(&f4), "reader").contains("was not written on"));
        let f5 = next(&take(&take(&f2_seen, &f3).unwrap(), &f4).unwrap(), OTHER, 9);
        assert!(forked(g(&f5), "reader").contains("lacks the write of device"));
        // Older: rolled back.
        assert!(matches!(
            take(&seen3, &s2),
            Err(ClientError::SharedStateRolledBack { .. })
        ));
    }

    #[test]
    fn a_state_before_the_chain_is_adopted_once() {
        // A note of a build before the chain: a version, no digest.
        let old = Seen {
            version: 4,
            ..Seen::default()
        };
        let seen = accept("i", &ME, &old, 4, [4; 32], None).unwrap();
        assert!(!seen.chained);
        assert_eq!(seen.digest, Some([4; 32]));
        // Chained from the next write on.
        let s5 = next(&seen, ME, 0);
        let seen5 = take(&seen, &s5).unwrap();
        assert!(seen5.chained);
        // Then a state without a chain is refused, at any version.
        forked(accept("i", &ME, &seen5, 5, [7; 32], None), "unchained at 5");
        let r = accept("i", &ME, &seen5, 6, [7; 32], None);
        assert!(forked(r, "unchained at 6").contains("no chain"));
    }

    /// A profile whose server holds a state of the format before the
    /// chain, and whose devices' notes have no digest (as a build before
    /// the chain left them): adopted once, chained by the next write,
    /// taken by the other device; an unchained state written after that
    /// is refused.
    #[test]
    fn a_profile_from_before_the_chain_is_adopted_once_and_chained_after() {
        use crate::{insecure, NetworkBackend, Profile, ServerBinding, DEFAULT_INDEX};
        use rand_core::OsRng;
        use sesame_core::Params;
        use sesame_server::{RunningServer, Tokens};

        let store = std::sync::Arc::new(sesame_store::MemoryStore::new());
        let certs = sesame_server::certs::localhost().unwrap();
        let token = Tokens::generate(&mut OsRng);
        let config = sesame_server::certs::loopback_config(&certs, &[("alice", &token)]).unwrap();
        let _server = RunningServer::start(config, store).unwrap();
        let binding = ServerBinding {
            url: _server.url(),
            token,
            ca_pem: Some(certs.ca_pem.into_bytes()),
            index_prefix: ServerBinding::fresh_prefix(&mut OsRng),
        };
        let tmp = tempfile::tempdir().unwrap();
        let mut backend = NetworkBackend::connect(&binding).unwrap();
        backend
            .create_index(DEFAULT_INDEX, "fast", &Params::new())
            .unwrap();
        let laptop = Profile::create_with_server(
            tmp.path().join("laptop"),
            "pw",
            "fast",
            &Params::new(),
            insecure::fast_kdf(),
            &binding,
        )
        .unwrap();
        let add = |p: &Profile, name: &str| {
            let file = tmp.path().join(name);
            std::fs::write(&file, format!("all {name}")).unwrap();
            let mut session = p.session(DEFAULT_INDEX).unwrap();
            session.add_documents(&[&file], &mut |_| {}).unwrap();
        };
        let all = |p: &Profile| {
            p.session(DEFAULT_INDEX)
                .unwrap()
                .search("all")
                .unwrap()
                .len()
        };
        add(&laptop, "a.txt");
        let remote = format!("{}{DEFAULT_INDEX}", binding.index_prefix);
        let names = [STATE_RECORD.to_owned(), HEAD_RECORD.to_owned()];
        let cipher = laptop.state_cipher();
        // Writes `state` as an unchained state at the record's next
        // version, and deletes the head record.
        let mut write_old = |state: &IndexState| {
            let now = backend
                .read_records(DEFAULT_INDEX, &names, &[])
                .unwrap()
                .unwrap();
            let version = now[0].version + 1;
            let blob = cipher
                .seal_shared(
                    &mut OsRng,
                    DEFAULT_INDEX,
                    version,
                    state,
                    &SharedExtras::default(),
                    &(),
                )
                .unwrap();
            let mut value = vec![INLINE];
            value.extend_from_slice(&blob);
            let writes = vec![
                IndexRecordWrite {
                    name: STATE_RECORD.into(),
                    expected: now[0].version,
                    value: Some(value),
                },
                IndexRecordWrite {
                    name: HEAD_RECORD.into(),
                    expected: ANY_VERSION,
                    value: None,
                },
            ];
            assert!(backend
                .write_records(DEFAULT_INDEX, writes)
                .unwrap()
                .is_none());
            version
        };
        let sidecar = laptop.shared_sidecar(DEFAULT_INDEX);
        let note = |path: &Path| read_sidecar(path).unwrap();
        let (device, _, _) = note(&sidecar);
        let state = laptop.load_state(DEFAULT_INDEX).unwrap();
        let version = write_old(&state);
        let old_note = Seen {
            version,
            ..Seen::default()
        };
        write_sidecar(&sidecar, &device, &old_note).unwrap();

        // Adopted as it is, then chained by the next write.
        assert_eq!(all(&laptop), 1);
        assert!(!note(&sidecar).1.chained);
        add(&laptop, "b.txt");
        let seen = note(&sidecar).1;
        assert!(seen.chained && seen.own.is_some(), "{seen:?}");
        // The other device, joined now, takes the chained state.
        let mut join_binding = binding.clone();
        join_binding.index_prefix = String::new();
        let (phone, _) =
            Profile::join(tmp.path().join("phone"), "pw", None, &join_binding, &remote).unwrap();
        assert_eq!(all(&phone), 2);
        assert!(note(&phone.shared_sidecar(DEFAULT_INDEX)).1.chained);

        // An unchained state after the chain began is refused by both.
        let state = laptop.load_state(DEFAULT_INDEX).unwrap();
        write_old(&state);
        for p in [&laptop, &phone] {
            let err = p.session(DEFAULT_INDEX).unwrap_err();
            assert!(err.to_string().contains("no chain"), "{err}");
        }
    }

    #[test]
    fn a_state_of_the_format_before_the_chain_opens_without_one() {
        let cipher = StateCipher::new(&sesame_crypto::Key::from_bytes([5; 32]), "p");
        let state = IndexState::new("fast", &sesame_core::Params::new(), vec![1]);
        let extras = SharedExtras::default();
        let mut rng = rand_core::OsRng;
        let old = cipher
            .seal_shared(&mut rng, "i", 3, &state, &extras, &())
            .unwrap();
        let (_, _, chain) = cipher.open_shared("i", 3, &old).unwrap();
        assert_eq!(chain, None);
        let chain = Chain {
            prev: [8; 32],
            writer: ME,
            heads: BTreeMap::new(),
        };
        let new = cipher
            .seal_shared(&mut rng, "i", 3, &state, &extras, &chain)
            .unwrap();
        assert_eq!(cipher.open_shared("i", 3, &new).unwrap().2, Some(chain));
        // The format's magic is bound: the old record relabelled as the
        // new format does not open.
        let mut relabelled = old.clone();
        relabelled[..8].copy_from_slice(b"SSMSHR02");
        assert!(cipher.open_shared("i", 3, &relabelled).is_err());
    }
}
