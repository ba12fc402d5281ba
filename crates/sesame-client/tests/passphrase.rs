//! The passphrase and the master key of a profile kept on a server: a
//! passphrase change reaches the server at once and only moves forward
//! (a device with an older header never puts it back, and asks for the
//! new passphrase), a server that serves an older or relabelled header
//! gains nothing, a server's Argon2id costs are capped, and a key-file
//! profile leaves nothing on the server a passphrase guess can open.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use sesame_client::{insecure, ClientError, NetworkBackend, Profile, DEFAULT_INDEX};
use sesame_core::{Params, Store};
use sesame_store::faulty::FaultyStore;

type Setup = support::Setup<FaultyStore>;

fn serve() -> Setup {
    support::setup(Arc::new(FaultyStore::new()), |_| {})
}

/// The first device, its default index shared by a first session.
fn first_device(s: &Setup) -> Profile {
    let p = support::server_profile(&s.binding, &s.tmp.path().join("laptop"), "pibas");
    assert!(p.session(DEFAULT_INDEX).unwrap().is_shared());
    p
}

fn remote(s: &Setup) -> String {
    format!("{}{DEFAULT_INDEX}", s.binding.index_prefix)
}

/// Joins the profile into `tmp/name` with `passphrase`.
fn join(s: &Setup, name: &str, passphrase: &str) -> Result<Profile, ClientError> {
    Profile::join(
        s.tmp.path().join(name),
        passphrase,
        None,
        &s.binding,
        &remote(s),
    )
    .map(|(p, _)| p)
}

/// The store key of the server's copy of the profile header.
fn header_key(s: &Setup) -> Vec<u8> {
    format!("v/alice/{}/profile", remote(s)).into_bytes()
}

/// The reproduction: device A changes the passphrase, device B
/// (still holding the old header) runs a command; the server must keep
/// the new header: a join with the old passphrase fails, one with the
/// new passphrase succeeds.
#[test]
fn a_device_with_the_old_header_does_not_undo_a_passphrase_change() {
    let s = serve();
    let laptop = first_device(&s);
    let phone = join(&s, "phone", "pw").unwrap();
    laptop
        .change_passphrase("pw2", insecure::fast_kdf())
        .unwrap();
    drop(laptop.session(DEFAULT_INDEX));
    // The phone runs a command (`list`) with the header it has.
    let listed = phone.session(DEFAULT_INDEX);
    let err = join(&s, "joined-old", "pw").map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::WrongPassphrase),
        "the old passphrase opens nothing on the server: {err}"
    );
    join(&s, "joined-new", "pw2").unwrap();
    // The phone was asked for the new passphrase.
    let err = listed.map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("new passphrase"), "{err}");

    // The old passphrase still opens the phone's own copy, but every
    // command that reaches the server asks for the new one again.
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    // The new passphrase opens the phone, which takes the new header.
    let phone = Profile::open(s.tmp.path().join("phone"), "pw2").unwrap();
    assert!(phone.session(DEFAULT_INDEX).unwrap().is_shared());
    assert!(matches!(
        Profile::open(s.tmp.path().join("phone"), "pw").unwrap_err(),
        ClientError::WrongPassphrase
    ));
    assert!(!phone.dir().join("profile.next.json").exists());
}

/// `passwd` puts the new header on the server itself: no other command
/// is needed for the old passphrase to stop opening it.
#[test]
fn a_passphrase_change_reaches_the_server_at_once() {
    let s = serve();
    let laptop = first_device(&s);
    laptop
        .change_passphrase("pw2", insecure::fast_kdf())
        .unwrap();
    let err = join(&s, "joined-old", "pw").map(drop).unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err}");
    join(&s, "joined-new", "pw2").unwrap();
    // A second change from the joined device moves the laptop on too.
    let joined = Profile::open(s.tmp.path().join("joined-new"), "pw2").unwrap();
    joined
        .change_passphrase("pw3", insecure::fast_kdf())
        .unwrap();
    let err = laptop.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    // A passwd from the device that is behind is refused too: it would
    // fork the header.
    let err = Profile::open(s.tmp.path().join("laptop"), "pw2")
        .unwrap()
        .change_passphrase("pw4", insecure::fast_kdf())
        .unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    join(&s, "joined-3", "pw3").unwrap();
    assert!(Profile::open(s.tmp.path().join("laptop"), "pw3").is_ok());
}

/// A server that serves an older header gains nothing: the device that
/// holds the newer one puts it back; a header relabelled as newer opens
/// with no passphrase, so it only denies service.
#[test]
fn a_server_serving_an_older_or_relabelled_header_gains_nothing() {
    let s = serve();
    let laptop = first_device(&s);
    let phone = join(&s, "phone", "pw").unwrap();
    let key = header_key(&s);
    let old = s.store.get(&key).unwrap().unwrap();
    laptop
        .change_passphrase("pw2", insecure::fast_kdf())
        .unwrap();
    let new = s.store.get(&key).unwrap().unwrap();
    assert_ne!(old[8..], new[8..]);

    // Rolled back: the laptop's next command puts the new header back.
    s.store.put(&key, &old).unwrap();
    laptop.session(DEFAULT_INDEX).unwrap();
    let now = s.store.get(&key).unwrap().unwrap();
    assert_eq!(now[8..], new[8..], "the newer header is back");
    let err = join(&s, "joined-old", "pw").map(drop).unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err}");

    // The old header relabelled with a newer version: it opens with
    // neither passphrase (the version is sealed with the key) ...
    let mut relabelled: serde_json::Value = serde_json::from_slice(&old[8..]).unwrap();
    relabelled["version"] = 7.into();
    let mut record = (u64::from_be_bytes(now[..8].try_into().unwrap()) + 1)
        .to_be_bytes()
        .to_vec();
    record.extend_from_slice(&serde_json::to_vec_pretty(&relabelled).unwrap());
    s.store.put(&key, &record).unwrap();
    for pass in ["pw", "pw2"] {
        let err = join(&s, &format!("joined-{pass}"), pass)
            .map(drop)
            .unwrap_err();
        assert!(matches!(err, ClientError::WrongPassphrase), "{pass}: {err}");
    }
    // ... and the phone, which holds the old header, neither takes it nor
    // puts its own back.
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    assert_eq!(s.store.get(&key).unwrap().unwrap(), record);
    let err = Profile::open(phone.dir(), "pw2").unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err}");
    let reopened = Profile::open(phone.dir(), "pw").unwrap();
    assert!(reopened.session(DEFAULT_INDEX).is_err());
    assert_eq!(s.store.get(&key).unwrap().unwrap(), record);
}

/// Puts `header` (JSON) as the server's profile record, one version on.
fn forge_header(s: &Setup, header: &serde_json::Value) {
    let key = header_key(s);
    let now = s.store.get(&key).unwrap().unwrap();
    let mut record = (u64::from_be_bytes(now[..8].try_into().unwrap()) + 1)
        .to_be_bytes()
        .to_vec();
    record.extend_from_slice(&serde_json::to_vec_pretty(header).unwrap());
    s.store.put(&key, &record).unwrap();
}

/// The server's profile record, as JSON.
fn server_header(s: &Setup) -> serde_json::Value {
    serde_json::from_slice(&s.store.get(&header_key(s)).unwrap().unwrap()[8..]).unwrap()
}

/// A server chooses the Argon2id costs of the header it serves: a device
/// accepts them only up to its local cap (`KdfLimit`), and refuses beyond
/// it before deriving anything, at a join and for a newer header seen on
/// the server alike.
#[test]
fn a_servers_argon2id_costs_beyond_the_local_cap_are_refused() {
    let s = serve();
    let _laptop = first_device(&s);
    let phone = join(&s, "phone", "pw").unwrap();
    let honest = server_header(&s);
    let beyond = |what: &str, err: &ClientError| {
        assert!(
            matches!(err, ClientError::InvalidArgument(m) if m.contains("more than this device accepts")),
            "{what}: {err}"
        );
    };
    // Nine passes of 8 KiB: cheap, but beyond the default cap of 8.
    let mut costly = honest.clone();
    costly["kdf"]["t"] = 9.into();
    forge_header(&s, &costly);
    let err = join(&s, "joined", "pw").map(drop).unwrap_err();
    beyond("nine passes", &err);
    assert!(!s.tmp.path().join("joined").exists(), "nothing written");
    // Raised, the cap lets the derivation run: the costs are sealed with
    // the key, so the edited header still does not open.
    let raised = sesame_client::KdfLimit {
        max_m_kib: 1 << 20,
        max_t: 9,
    };
    let err = Profile::join_with_limit(
        s.tmp.path().join("joined"),
        "pw",
        None,
        &s.binding,
        &remote(&s),
        raised,
    )
    .map(drop)
    .unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err}");
    // The most `validate` alone allows: 4 GiB and 64 passes.
    let mut huge = honest.clone();
    huge["kdf"]["m_kib"] = (4u64 << 20).into();
    huge["kdf"]["t"] = 64.into();
    forge_header(&s, &huge);
    let err = join(&s, "joined", "pw").map(drop).unwrap_err();
    beyond("4 GiB, 64 passes", &err);
    // As a newer header seen by a device: kept, and refused at the next
    // open before any derivation.
    huge["version"] = 9.into();
    forge_header(&s, &huge);
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    let err = Profile::open(phone.dir(), "pw").unwrap_err();
    beyond("newer header", &err);
}

/// A profile that needs a key file works over a server, and the header
/// the server keeps cannot be tested by a passphrase guess: the key that
/// opens it mixes the key file's SHA-256 into the Argon2id output, so every
/// guess fails without the file, the right passphrase included.
#[test]
fn a_key_file_profile_on_a_server_leaves_nothing_a_passphrase_guess_opens() {
    let s = serve();
    let key = [7u8; 32];
    let backend = NetworkBackend::connect(&s.binding).unwrap();
    backend
        .create_index(DEFAULT_INDEX, "pibas", &Params::new())
        .unwrap();
    let laptop = Profile::create_with_server_and_key_file(
        s.tmp.path().join("laptop"),
        "pw",
        "pibas",
        &Params::new(),
        insecure::fast_kdf(),
        &s.binding,
        &key,
    )
    .unwrap();
    let docs = s.tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "zanzibar budget").unwrap();
    support::add(&laptop, &docs);
    assert_eq!(server_header(&s)["key_file"], true);

    // The guess loop of whoever holds the server's copy.
    let wrong_key = [8u8; 32];
    for guess in ["123456", "password", "letmein", "pw"] {
        let err = join(&s, "guess", guess).map(drop).unwrap_err();
        assert!(matches!(err, ClientError::KeyFileNeeded(_)), "{err}");
        let err = Profile::join(
            s.tmp.path().join("guess"),
            guess,
            Some(&wrong_key),
            &s.binding,
            &remote(&s),
        )
        .map(drop)
        .unwrap_err();
        assert!(
            matches!(err, ClientError::WrongPassphrase),
            "{guess}: {err}"
        );
    }
    // With the file, a second device joins and finds the document.
    let (phone, _) = Profile::join(
        s.tmp.path().join("phone"),
        "pw",
        Some(&key),
        &s.binding,
        &remote(&s),
    )
    .unwrap();
    let hits = phone
        .session(DEFAULT_INDEX)
        .unwrap()
        .search("zanzibar")
        .unwrap();
    assert_eq!(hits.len(), 1);
}

/// `passwd` on a server profile whose header write fails, refused by the
/// server or applied with its answer lost: never neither passphrase. The
/// new one opens the device (its next open takes the header `passwd` kept
/// aside, and puts it on the server if the server lacks it); until then
/// the old one opens it too, and a refused write left the server's header
/// as it was.
#[test]
fn a_passphrase_change_whose_server_write_fails_leaves_one_passphrase_working() {
    for fault in [
        sesame_store::faulty::Fault::Refused,
        sesame_store::faulty::Fault::AnswerLost,
    ] {
        let s = serve();
        let laptop = first_device(&s);
        s.store.fail(fault, 0);
        let changed = laptop.change_passphrase("pw2", insecure::fast_kdf());
        s.store.heal();
        assert!(changed.is_err(), "{fault:?}");
        drop(laptop);
        let dir = s.tmp.path().join("laptop");
        let server_new = join(&s, &format!("joined-{fault:?}"), "pw2").is_ok();
        let works = |pass: &str| {
            Profile::open(&dir, pass)
                .and_then(|p| p.session(DEFAULT_INDEX).map(drop))
                .is_ok()
        };
        match fault {
            sesame_store::faulty::Fault::Refused => {
                assert!(!server_new, "the server keeps the old header");
                assert!(works("pw"), "the old passphrase works");
            }
            _ => assert!(server_new, "the server took the new header"),
        }
        assert!(works("pw2"), "{fault:?}: the new passphrase works");
        assert!(
            join(&s, &format!("again-{fault:?}"), "pw2").is_ok(),
            "{fault:?}: and the server has the new header now"
        );
        assert!(!works("pw"), "{fault:?}: the change is complete");
    }
}
