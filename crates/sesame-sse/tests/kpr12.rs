//! KPR12 with Merkle verification: results equal a plaintext oracle after
//! random updates, and a malicious server that drops, adds, replays or
//! alters a result or a proof is caught every time.

// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Error, LocalChannel, Meter, Params, Service, Store, WriteBatch};
use sesame_sse::kpr12::{Kpr12Client, Kpr12Server, Response};
use sesame_sse::{DocId, KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

type Tamper = Box<dyn FnMut(&mut Response)>;

/// A server that answers honestly, then lets `tamper` change the answer.
struct Malicious {
    inner: LocalChannel<Box<dyn Service>>,
    tamper: Option<Tamper>,
    /// The last response sent, encoded.
    last: Vec<u8>,
    /// A response to send instead of the honest one.
    replay: Option<Vec<u8>>,
}

impl Malicious {
    fn new() -> Self {
        Self::over(Arc::new(MemoryStore::new()))
    }

    /// A server over `store`, which the test may snapshot and put back.
    fn over(store: Arc<dyn Store>) -> Self {
        Malicious {
            inner: LocalChannel::new(
                sesame_sse::kpr12::scheme()
                    .server(store, &sesame_core::Params::new())
                    .unwrap(),
            ),
            tamper: None,
            last: Vec::new(),
            replay: None,
        }
    }
}

impl Channel for Malicious {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let honest = self.inner.call(request)?;
        if let Some(r) = self.replay.take() {
            return Ok(r);
        }
        let mut out = honest;
        if let Some(t) = &mut self.tamper {
            let mut r: Response = sesame_core::wire::decode(&out)?;
            t(&mut r);
            out = sesame_core::wire::encode(&r)?;
        }
        self.last = out.clone();
        Ok(out)
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

fn kw(i: usize) -> Vec<u8> {
    format!("w{i}").into_bytes()
}

/// `w0`..`w4` over documents 0..30.
fn corpus() -> Multimap {
    let mut db = Multimap::new();
    for d in 0..30u64 {
        for i in 0..5 {
            if !(d as usize + i).is_multiple_of(3) {
                db.entry(kw(i)).or_default().push(d);
            }
        }
    }
    db
}

/// A client and server holding [`corpus`].
fn fixture() -> (Kpr12Client, Malicious, ChaCha20Rng, Multimap) {
    fixture_over(Arc::new(MemoryStore::new()))
}

/// As [`fixture`], the server over `store`.
fn fixture_over(store: Arc<dyn Store>) -> (Kpr12Client, Malicious, ChaCha20Rng, Multimap) {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let db = corpus();
    let mut client = Kpr12Client::new(&mut rng, &Params::new()).unwrap();
    let mut ch = Malicious::over(store);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    (client, ch, rng, db)
}

fn assert_caught(r: sesame_core::Result<Vec<DocId>>, what: &str) {
    assert!(matches!(r, Err(Error::Crypto)), "{what}: {r:?}");
}

fn found(r: &mut Response) -> (&mut Vec<DocId>, &mut Vec<sesame_sse::kpr12::Access>) {
    match r {
        Response::Found { ids, proof } => (ids, proof),
        other => panic!("not a search response: {other:?}"),
    }
}

#[test]
fn random_updates_follow_the_oracle() {
    for seed in 0..6u64 {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut truth: BTreeMap<Vec<u8>, BTreeSet<DocId>> = BTreeMap::new();
        let mut db = Multimap::new();
        for _ in 0..rng.gen_range(0..40) {
            let (w, d) = (kw(rng.gen_range(0..6)), rng.gen_range(0..25u64));
            db.entry(w.clone()).or_default().push(d);
            truth.entry(w).or_default().insert(d);
        }
        let mut client = Kpr12Client::new(&mut rng, &Params::new()).unwrap();
        let mut ch = Malicious::new();
        client.setup(&mut rng, &mut ch, &db).unwrap();
        for step in 0..120 {
            let doc = rng.gen_range(0..25u64);
            let words: Vec<Vec<u8>> = (0..rng.gen_range(1..4))
                .map(|_| kw(rng.gen_range(0..8)))
                .collect();
            let add = rng.gen_bool(0.6);
            let op = if add { UpdateOp::Add } else { UpdateOp::Delete };
            client.update(&mut rng, &mut ch, op, doc, &words).unwrap();
            for w in &words {
                let set = truth.entry(w.clone()).or_default();
                if add {
                    set.insert(doc);
                } else {
                    set.remove(&doc);
                }
            }
            let w = kw(rng.gen_range(0..9));
            let want: Vec<DocId> = truth
                .get(&w)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let got = client.search(&mut rng, &mut ch, &w).unwrap();
            assert_eq!(got, want, "seed {seed} step {step} keyword {w:?}");
        }
        for (w, set) in &truth {
            let want: Vec<DocId> = set.iter().copied().collect();
            assert_eq!(client.search(&mut rng, &mut ch, w).unwrap(), want);
        }
    }
}

#[test]
fn dropped_result_is_caught() {
    let (mut client, mut ch, mut rng, _) = fixture();
    // Only the identifier list.
    ch.tamper = Some(Box::new(|r| {
        found(r).0.pop();
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(1)), "id dropped");
    // The identifier and the last node of the list with it.
    ch.tamper = Some(Box::new(|r| {
        let (ids, proof) = found(r);
        ids.pop();
        proof.pop();
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(1)), "node dropped");
    // Everything: the keyword claimed absent.
    ch.tamper = Some(Box::new(|r| {
        let (ids, proof) = found(r);
        ids.clear();
        proof.truncate(1);
        proof[0].cell.clear();
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(1)), "keyword hidden");
}

#[test]
fn added_result_is_caught() {
    let (mut client, mut ch, mut rng, _) = fixture();
    ch.tamper = Some(Box::new(|r| found(r).0.push(1000)));
    assert_caught(client.search(&mut rng, &mut ch, &kw(2)), "id added");
    // An identifier of the index that does not match the keyword.
    ch.tamper = Some(Box::new(|r| {
        let ids = found(r).0;
        let missing = (0..30).find(|d| !ids.contains(d)).unwrap();
        ids.push(missing);
        ids.sort_unstable();
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(2)), "foreign id added");
    // A node access duplicated in the transcript.
    ch.tamper = Some(Box::new(|r| {
        let (_, proof) = found(r);
        let last = proof.last().unwrap().clone();
        proof.push(last);
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(2)), "access added");
}

#[test]
fn replayed_response_is_caught() {
    let (mut client, mut ch, mut rng, _) = fixture();
    let before = client.search(&mut rng, &mut ch, &kw(3)).unwrap();
    let stale = ch.last.clone();
    // Unchanged index: the same answer is simply right.
    ch.replay = Some(stale.clone());
    assert_eq!(client.search(&mut rng, &mut ch, &kw(3)).unwrap(), before);
    // After an addition to the keyword, the old answer is caught.
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 500, &[kw(3)])
        .unwrap();
    ch.replay = Some(stale.clone());
    assert_caught(client.search(&mut rng, &mut ch, &kw(3)), "stale after add");
    // After a deletion elsewhere too: the root moved.
    let fresh = {
        client.search(&mut rng, &mut ch, &kw(3)).unwrap();
        ch.last.clone()
    };
    client
        .update(&mut rng, &mut ch, UpdateOp::Delete, 1, &[kw(4)])
        .unwrap();
    ch.replay = Some(fresh);
    assert_caught(
        client.search(&mut rng, &mut ch, &kw(3)),
        "stale after delete",
    );
    // A stale answer to an update is caught as well.
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 501, &[kw(0)])
        .unwrap();
    let stale_update = ch.last.clone();
    ch.replay = Some(stale_update);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 502, &[kw(0)])
        .is_err());
}

#[test]
fn altered_result_is_caught() {
    let (mut client, mut ch, mut rng, _) = fixture();
    ch.tamper = Some(Box::new(|r| found(r).0[0] ^= 1));
    assert_caught(client.search(&mut rng, &mut ch, &kw(0)), "id altered");
    // The node's ciphertext altered (so it decrypts to another id).
    ch.tamper = Some(Box::new(|r| {
        let (_, proof) = found(r);
        let node = proof.iter_mut().rev().find(|a| a.cell.len() == 33).unwrap();
        node.cell[3] ^= 0x10;
    }));
    assert_caught(client.search(&mut rng, &mut ch, &kw(0)), "node altered");
}

#[test]
fn altered_proof_is_caught() {
    let (mut client, mut ch, mut rng, _) = fixture();
    let cases: Vec<(&str, Tamper)> = vec![
        (
            "sibling flipped",
            Box::new(|r| found(r).1[1].siblings[0][5] ^= 1),
        ),
        (
            "sibling removed",
            Box::new(|r| {
                let a = &mut found(r).1[0];
                a.siblings.pop();
            }),
        ),
        (
            "mask changed",
            Box::new(|r| {
                let a = &mut found(r).1[0];
                let top = 63 - a.present.leading_zeros();
                a.present ^= 1 << top;
            }),
        ),
        (
            "search-table cell altered",
            Box::new(|r| {
                let c = &mut found(r).1[0].cell;
                let n = c.len();
                c[n - 1] ^= 1;
            }),
        ),
        ("accesses swapped", Box::new(|r| found(r).1.swap(1, 2))),
        ("proof emptied", Box::new(|r| found(r).1.clear())),
    ];
    for (what, t) in cases {
        ch.tamper = Some(t);
        assert_caught(client.search(&mut rng, &mut ch, &kw(1)), what);
    }
    // Honest again: the client was not disturbed.
    ch.tamper = None;
    assert!(client.search(&mut rng, &mut ch, &kw(1)).is_ok());
}

#[test]
fn altered_update_proof_is_caught_and_keeps_the_root() {
    let (mut client, mut ch, mut rng, _) = fixture();
    let root = client.root();
    ch.tamper = Some(Box::new(|r| {
        if let Response::Updated(p) = r {
            p[2].siblings[0][0] ^= 1;
        }
    }));
    assert!(matches!(
        client.update(&mut rng, &mut ch, UpdateOp::Add, 99, &[kw(0), kw(9)]),
        Err(Error::Crypto)
    ));
    assert_eq!(client.root(), root);
    ch.tamper = Some(Box::new(|r| {
        if let Response::Updated(p) = r {
            p.pop();
        }
    }));
    assert!(matches!(
        client.update(&mut rng, &mut ch, UpdateOp::Delete, 1, &[kw(1)]),
        Err(Error::Crypto)
    ));
    assert_eq!(client.root(), root);
}

#[test]
fn state_round_trip() {
    let (mut client, mut ch, mut rng, db) = fixture();
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 77, &[kw(0), kw(7)])
        .unwrap();
    let saved = client.save_state().unwrap();
    let mut again = (sesame_sse::kpr12::scheme().restore_client)(&saved).unwrap();
    assert_eq!(again.save_state().unwrap(), saved);
    let mut want: Vec<DocId> = db[&kw(0)].clone();
    want.push(77);
    assert_eq!(again.search(&mut rng, &mut ch, &kw(0)).unwrap(), want);
    again
        .update(&mut rng, &mut ch, UpdateOp::Delete, 77, &[kw(0)])
        .unwrap();
    assert_eq!(
        again.search(&mut rng, &mut ch, &kw(0)).unwrap(),
        db[&kw(0)].clone()
    );
    assert_eq!(again.search(&mut rng, &mut ch, &kw(7)).unwrap(), vec![77]);
    assert!(Kpr12Client::restore(&saved[..saved.len() - 1]).is_err());
}

#[test]
fn malformed_responses_are_errors() {
    let (mut client, mut ch, mut rng, _) = fixture();
    let good = {
        client.search(&mut rng, &mut ch, &kw(0)).unwrap();
        ch.last.clone()
    };
    let mut bad: Vec<Vec<u8>> = vec![
        Vec::new(),
        good[..good.len() / 2].to_vec(),
        vec![0xff; 40],
        sesame_core::wire::encode(&Response::Stored).unwrap(),
        sesame_core::wire::encode(&Response::Updated(Vec::new())).unwrap(),
    ];
    let mut r = ChaCha20Rng::seed_from_u64(5);
    for _ in 0..200 {
        let mut b = good.clone();
        let i = r.gen_range(0..b.len());
        b[i] ^= 1 << r.gen_range(0..8);
        bad.push(b);
    }
    for b in bad {
        ch.replay = Some(b);
        assert!(client.search(&mut rng, &mut ch, &kw(0)).is_err());
    }
    // Updates as well.
    ch.replay = Some(good);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 3, &[kw(0)])
        .is_err());
}

#[test]
fn server_steps_are_callable_alone() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let server = Kpr12Server::new(store);
    let mut client = Kpr12Client::new(&mut rng, &Params::new()).unwrap();
    let mut db = Multimap::new();
    db.insert(b"a".to_vec(), vec![3, 1, 2]);
    let (cells, root) = client.index_gen(&mut rng, &db).unwrap();
    server.put(true, cells).unwrap();
    assert_eq!(server.root().unwrap(), root);
    let t = client.keyword_token(b"a");
    assert_eq!(server.search(&t).unwrap(), vec![1, 2, 3]);
    let (ids, proof) = server.prove(&t).unwrap();
    assert_eq!(client.verify(&t, &ids, &proof).unwrap(), vec![1, 2, 3]);
    let add = client.add_token(&mut rng, 9, &[b"a".to_vec()]).unwrap();
    let p = server.add(&add).unwrap();
    client.apply_add(&add, &p).unwrap();
    assert_eq!(server.root().unwrap(), client.root());
    let del = client.del_token(1, &[b"a".to_vec()]).unwrap();
    let p = server.del(&del).unwrap();
    client.apply_del(&del, &p).unwrap();
    assert_eq!(server.root().unwrap(), client.root());
    let (ids, proof) = server.prove(&t).unwrap();
    assert_eq!(client.verify(&t, &ids, &proof).unwrap(), vec![2, 3, 9]);
    assert!(client.add_token(&mut rng, u64::MAX, &[]).is_err());
}

/// A channel whose next call is cut: `Before` fails before the server sees
/// the request, `After` after the server applied it (the answer is lost).
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    Before,
    After,
}

struct Lossy {
    inner: Malicious,
    cut: Option<Cut>,
    /// Answer `LastUpdate` with `NotApplied`, whatever the truth.
    deny: bool,
}

impl Channel for Lossy {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let lost = || Error::Transport("connection reset".into());
        match self.cut.take() {
            Some(Cut::Before) => return Err(lost()),
            Some(Cut::After) => {
                self.inner.call(request)?;
                return Err(lost());
            }
            None => {}
        }
        if self.deny {
            let r: sesame_sse::kpr12::Request = sesame_core::wire::decode(request)?;
            if matches!(r, sesame_sse::kpr12::Request::LastUpdate { .. }) {
                return sesame_core::wire::encode(&Response::NotApplied);
            }
        }
        self.inner.call(request)
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

fn lossy() -> (Kpr12Client, Lossy, ChaCha20Rng, Multimap) {
    let (client, inner, rng, db) = fixture();
    let ch = Lossy {
        inner,
        cut: None,
        deny: false,
    };
    (client, ch, rng, db)
}

#[test]
fn an_update_whose_answer_was_lost_is_settled_by_the_next_call() {
    let (mut client, mut ch, mut rng, db) = lossy();
    // An addition applied by the server, its answer lost.
    ch.cut = Some(Cut::After);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 90, &[kw(0), kw(8)])
        .is_err());
    assert!(client.has_pending_update());
    // The pending update survives a save and restore.
    let mut client = Kpr12Client::restore(&client.save_state().unwrap()).unwrap();
    let mut want = db[&kw(0)].clone();
    want.push(90);
    assert_eq!(client.search(&mut rng, &mut ch, &kw(0)).unwrap(), want);
    assert!(!client.has_pending_update());
    // A deletion whose answer is lost, settled by the next update.
    ch.cut = Some(Cut::After);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Delete, 90, &[kw(0), kw(8)])
        .is_err());
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 91, &[kw(8)])
        .unwrap();
    assert_eq!(client.search(&mut rng, &mut ch, &kw(8)).unwrap(), vec![91]);
    assert_eq!(
        client.search(&mut rng, &mut ch, &kw(0)).unwrap(),
        db[&kw(0)].clone()
    );
}

#[test]
fn an_update_that_never_arrived_did_not_happen() {
    let (mut client, mut ch, mut rng, db) = lossy();
    ch.cut = Some(Cut::Before);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 92, &[kw(1)])
        .is_err());
    assert_eq!(
        client.search(&mut rng, &mut ch, &kw(1)).unwrap(),
        db[&kw(1)].clone()
    );
    // And the next updates go on from the same root.
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 92, &[kw(1)])
        .unwrap();
    let mut want = db[&kw(1)].clone();
    want.push(92);
    assert_eq!(client.search(&mut rng, &mut ch, &kw(1)).unwrap(), want);
}

#[test]
fn a_server_that_keeps_an_applied_update_but_denies_it_is_caught() {
    let (mut client, mut ch, mut rng, _) = lossy();
    ch.cut = Some(Cut::After);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 93, &[kw(2)])
        .is_err());
    ch.deny = true;
    assert_caught(client.search(&mut rng, &mut ch, &kw(2)), "denied update");
    assert_caught(client.search(&mut rng, &mut ch, &kw(3)), "denied update");
}

#[test]
fn a_state_saved_before_lost_answers_were_kept_still_restores() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct StateV1 {
        master: [u8; 32],
        root: [u8; 32],
    }
    #[derive(serde::Deserialize)]
    struct StateV2 {
        _magic: [u8; 4],
        master: [u8; 32],
        root: [u8; 32],
        _pending: Option<Vec<u8>>,
    }
    let (client, mut ch, mut rng, db) = fixture();
    let now: StateV2 = sesame_core::wire::decode(&client.save_state().unwrap()).unwrap();
    let old = sesame_core::wire::encode(&StateV1 {
        master: now.master,
        root: now.root,
    })
    .unwrap();
    let mut restored = Kpr12Client::restore(&old).unwrap();
    assert_eq!(restored.root(), client.root());
    assert!(!restored.has_pending_update());
    assert_eq!(
        restored.search(&mut rng, &mut ch, &kw(4)).unwrap(),
        db[&kw(4)].clone()
    );
}

/// Everything `store` holds.
fn snapshot(store: &MemoryStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    store.scan_prefix(b"").unwrap()
}

/// Puts `store` back to `snap`: what the server's operator does with a
/// copy of its store taken earlier.
fn put_back(store: &MemoryStore, snap: &[(Vec<u8>, Vec<u8>)]) {
    let mut batch = WriteBatch::new();
    for (k, _) in snapshot(store) {
        batch.delete(k);
    }
    for (k, v) in snap {
        batch.put(k.clone(), v.clone());
    }
    store.write(batch).unwrap();
}

/// A client and a lossy server over a store the test holds.
fn lossy_over_store() -> (Kpr12Client, Lossy, Arc<MemoryStore>, ChaCha20Rng, Multimap) {
    let store = Arc::new(MemoryStore::new());
    let (client, inner, rng, db) = fixture_over(store.clone());
    let ch = Lossy {
        inner,
        cut: None,
        deny: false,
    };
    (client, ch, store, rng, db)
}

/// The limit of what the root can show: a server that applies an update,
/// loses (or withholds) its answer, then puts back a copy of its store
/// from before the update (its record of the last update included) and
/// answers `NotApplied` leaves exactly the store the client's root
/// describes, as when the request never arrived. The client cannot tell
/// the two apart and believes the update was not applied; that belief is
/// true of the index it is then served: every answer verifies and none
/// holds the update, and the update sent again is applied.
#[test]
fn a_snapshot_put_back_over_an_unsettled_update_is_believed_as_not_applied() {
    let (mut client, mut ch, store, mut rng, db) = lossy_over_store();
    let before = snapshot(&store);
    let root = client.root();
    // The server applies the update and loses the answer ...
    ch.cut = Some(Cut::After);
    assert!(client
        .update(&mut rng, &mut ch, UpdateOp::Add, 94, &[kw(2)])
        .is_err());
    assert!(client.has_pending_update());
    // ... then puts its store back as it was before the update: its
    // record of the last update goes back too, so it answers `NotApplied`.
    put_back(&store, &before);
    assert_eq!(
        client.search(&mut rng, &mut ch, &kw(2)).unwrap(),
        db[&kw(2)].clone()
    );
    assert!(!client.has_pending_update());
    assert_eq!(client.root(), root);
    // The update sent again is applied.
    client
        .update(&mut rng, &mut ch, UpdateOp::Add, 94, &[kw(2)])
        .unwrap();
    let mut want = db[&kw(2)].clone();
    want.push(94);
    assert_eq!(client.search(&mut rng, &mut ch, &kw(2)).unwrap(), want);
}

/// What the root does show: a copy of the store from before an update
/// the client settled (its answer arrived, or `LastUpdate` returned its
/// proof) is caught by every later answer, and nothing it says is used.
#[test]
fn a_snapshot_put_back_over_a_settled_update_is_caught() {
    for lost in [false, true] {
        let (mut client, mut ch, store, mut rng, db) = lossy_over_store();
        let before = snapshot(&store);
        if lost {
            ch.cut = Some(Cut::After);
            assert!(client
                .update(&mut rng, &mut ch, UpdateOp::Add, 95, &[kw(3)])
                .is_err());
            // Settled by the next call: the server returns the proof.
            let mut want = db[&kw(3)].clone();
            want.push(95);
            assert_eq!(client.search(&mut rng, &mut ch, &kw(3)).unwrap(), want);
        } else {
            client
                .update(&mut rng, &mut ch, UpdateOp::Add, 95, &[kw(3)])
                .unwrap();
        }
        put_back(&store, &before);
        for w in [kw(3), kw(4), kw(9)] {
            assert_caught(client.search(&mut rng, &mut ch, &w), "store put back");
        }
        assert!(client
            .update(&mut rng, &mut ch, UpdateOp::Add, 96, &[kw(4)])
            .is_err());
    }
}
