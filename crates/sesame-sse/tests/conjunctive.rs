//! Simple-index conjunctive schemes (seed 003): results equal the plaintext
//! oracle for every scheme, malformed input is an error, and a malicious
//! server that drops, adds, replays or alters a result or a proof is caught
//! by SI-SSE-RV's verification every time.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{wire, Channel, Error, LocalChannel, Meter, QueryKind, Result, Typed};
use sesame_crypto::key::Key;
use sesame_sse::conjunctive::protocol::{Document, Hit, Request, Response, SiClient, SiServer};
use sesame_sse::conjunctive::{self, Conjunction, SiAlgorithms};
use sesame_store::MemoryStore;

const N: usize = 5;

fn corpus(rng: &mut ChaCha20Rng, docs: u64) -> Vec<Document> {
    (0..docs)
        .map(|id| Document {
            id: 100 + id,
            // Small alphabets so that conjunctions match some documents.
            fields: (0..N)
                .map(|j| format!("f{j}=v{}", rng.gen_range(0..2 + j)).into_bytes())
                .collect(),
            body: format!("body of document {id}").into_bytes(),
        })
        .collect()
}

fn queries(docs: &[Document], rng: &mut ChaCha20Rng) -> Vec<Conjunction> {
    let mut out = Vec::new();
    for k in 0..6 {
        // Half the queries are taken from a document (so something matches).
        let src = &docs[rng.gen_range(0..docs.len())];
        let t = 1 + k % 3;
        let mut fields: Vec<u32> = (0..N as u32).collect();
        for i in 0..t {
            let j = rng.gen_range(i..fields.len());
            fields.swap(i, j);
        }
        let terms = fields[..t]
            .iter()
            .map(|&j| {
                let v = if k % 2 == 0 {
                    src.fields[j as usize].clone()
                } else {
                    format!("f{j}=v{}", rng.gen_range(0..2 + j)).into_bytes()
                };
                (j, v)
            })
            .collect();
        out.push(Conjunction::new(terms));
    }
    out
}

type Chan = LocalChannel<Typed<SiServer>>;

fn setup(scheme: SiAlgorithms, docs: &[Document], seed: u64) -> (SiClient, Chan, ChaCha20Rng) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut client = SiClient::new(&mut rng, &scheme, N).unwrap();
    let mut ch = LocalChannel::new(Typed(SiServer::new(Arc::new(MemoryStore::new()), scheme)));
    client.upload(&mut rng, &mut ch, docs, true).unwrap();
    (client, ch, rng)
}

fn oracle(docs: &[Document], q: &Conjunction) -> Vec<(u64, Vec<u8>)> {
    docs.iter()
        .filter(|d| q.matches(&d.fields))
        .map(|d| (d.id, d.body.clone()))
        .collect()
}

#[test]
fn every_scheme_equals_the_oracle() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let docs = corpus(&mut rng, 10);
    let qs = queries(&docs, &mut rng);
    for scheme in conjunctive::algorithms() {
        let (mut client, mut ch, mut rng) = setup(scheme, &docs, 11);
        let mut matched_any = false;
        for q in &qs {
            let got = client.search(&mut rng, &mut ch, q).unwrap();
            let want = oracle(&docs, q);
            matched_any |= !want.is_empty();
            assert_eq!(got, want, "{} on {q:?}", scheme.descriptor.name);
        }
        assert!(matched_any, "the workload matches something");
    }
}

#[test]
fn documents_added_later_are_found() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let docs = corpus(&mut rng, 6);
    let q = Conjunction::new(vec![(0, docs[0].fields[0].clone())]);
    for scheme in conjunctive::algorithms() {
        let (mut client, mut ch, mut rng) = setup(scheme, &docs[..3], 12);
        client.upload(&mut rng, &mut ch, &docs[3..], false).unwrap();
        let got = client.search(&mut rng, &mut ch, &q).unwrap();
        assert_eq!(got, oracle(&docs, &q), "{}", scheme.descriptor.name);
    }
}

#[test]
fn bad_queries_and_bad_bytes_are_errors_not_panics() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    for scheme in conjunctive::algorithms() {
        let s = (scheme.new)(&Key::generate(&mut rng), N).unwrap();
        assert!(s.token(&mut rng, &Conjunction::new(vec![])).is_err());
        assert!(s
            .token(&mut rng, &Conjunction::new(vec![(N as u32, b"x".to_vec())]))
            .is_err());
        assert!(s.encrypt_index(&mut rng, 1, 1, &[b"a".to_vec()]).is_err());
        let fields: Vec<Vec<u8>> = (0..N).map(|j| vec![j as u8]).collect();
        let index = s.encrypt_index(&mut rng, 1, 1, &fields).unwrap();
        let token = s
            .token(&mut rng, &Conjunction::new(vec![(1, vec![1])]))
            .unwrap();
        assert!((scheme.validate)(&index).is_ok());
        assert!((scheme.tester)(&token).unwrap().matches(&index).unwrap());
        for cut in [0, 3, 4, 50, token.len() - 1] {
            assert!(
                (scheme.tester)(&token[..cut]).is_err(),
                "token cut at {cut}"
            );
        }
        let mut junk = token.clone();
        junk.push(0);
        assert!((scheme.tester)(&junk).is_err());
        let tester = (scheme.tester)(&token).unwrap();
        for cut in [0, 3, 4, 100, index.len() - 1] {
            assert!(tester.matches(&index[..cut]).is_err(), "index cut at {cut}");
            assert!((scheme.validate)(&index[..cut]).is_err());
        }
        let mut flipped = index.clone();
        flipped[10] ^= 0x40;
        assert!((scheme.validate)(&flipped).is_err());
        let mut garbage = token.clone();
        for b in garbage.iter_mut().skip(4).take(40) {
            *b = 0xff;
        }
        assert!((scheme.tester)(&garbage).is_err());
    }
}

// ---------------------------------------------------------------------------
// A malicious server: a channel that rewrites the honest answer.

type Attack = Box<dyn FnMut(&mut Vec<Hit>)>;

struct Malicious {
    inner: Chan,
    attack: Attack,
}

impl Channel for Malicious {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let resp = self.inner.call(request)?;
        let req: Request = wire::decode(request)?;
        match (req, wire::decode::<Response>(&resp)?) {
            (Request::Search { .. }, Response::Hits(mut hits)) => {
                (self.attack)(&mut hits);
                wire::encode(&Response::Hits(hits))
            }
            _ => Ok(resp),
        }
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

/// Runs `attack` against every verifiable scheme on a query that matches
/// some but not all documents, and checks that the client rejects it.
fn caught(attack: impl Fn(&mut Vec<Hit>, &[Hit]) + Clone + 'static) {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let docs = corpus(&mut rng, 8);
    let q = Conjunction::new(vec![(0, docs[0].fields[0].clone())]);
    let want = oracle(&docs, &q);
    assert!(!want.is_empty() && want.len() < docs.len());
    let mut verifiable = 0;
    for scheme in conjunctive::algorithms() {
        if !scheme.descriptor.queries.contains(&QueryKind::Verifiable) {
            continue;
        }
        let (mut client, ch, mut rng) = setup(scheme, &docs, 13);
        assert!(client.scheme().verifiable());
        verifiable += 1;
        // An earlier honest answer, for replays.
        let mut ch = ch;
        let other = Conjunction::new(vec![(1, docs[1].fields[1].clone())]);
        let token = client.scheme().token(&mut rng, &other).unwrap();
        let old = ch.service().0.search(&token, true).unwrap();
        assert_eq!(client.search(&mut rng, &mut ch, &q).unwrap(), want);
        let a = attack.clone();
        let mut bad = Malicious {
            inner: ch,
            attack: Box::new(move |hits| a(hits, &old)),
        };
        let r = client.search(&mut rng, &mut bad, &q);
        assert!(
            matches!(r, Err(Error::Crypto)),
            "{}: attack not caught: {r:?}",
            scheme.descriptor.name
        );
    }
    assert!(verifiable >= 1);
}

/// A server that kept the first upload of every document: a second,
/// honest server receives only the first `Put`, and the attack sees its
/// answer (`old`) beside the current honest one.
/// An attack on the current answer, given the old server's answer.
type OldAttack = Box<dyn FnMut(&mut Vec<Hit>, &[Hit])>;

struct KeepsOldUploads {
    inner: Chan,
    old: Chan,
    puts: usize,
    attack: OldAttack,
}

impl Channel for KeepsOldUploads {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let resp = self.inner.call(request)?;
        let req: Request = wire::decode(request)?;
        match (req, wire::decode::<Response>(&resp)?) {
            (Request::Put { .. }, _) => {
                self.puts += 1;
                if self.puts == 1 {
                    self.old.call(request)?;
                }
                Ok(resp)
            }
            (Request::Search { .. }, Response::Hits(mut hits)) => {
                let old = match wire::decode::<Response>(&self.old.call(request)?)? {
                    Response::Hits(h) => h,
                    Response::Stored => Vec::new(),
                };
                (self.attack)(&mut hits, &old);
                wire::encode(&Response::Hits(hits))
            }
            _ => Ok(resp),
        }
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

/// Uploads `docs`, then `docs[0]` again with `second` as its fields, to a
/// server that kept the first upload, and runs `attack` on the answer to
/// `q`; returns the client's verdict on the attacked answer, after checking
/// that the honest answer reflects the second upload.
fn against_a_kept_upload(
    second: Vec<Vec<u8>>,
    q: &Conjunction,
    attack: impl FnMut(&mut Vec<Hit>, &[Hit]) + 'static,
) -> Result<Vec<(u64, Vec<u8>)>> {
    let scheme = conjunctive::algorithms_of("si-sse-rv").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let mut docs = corpus(&mut rng, 6);
    let mut client = SiClient::new(&mut rng, &scheme, N).unwrap();
    let store = || Typed(SiServer::new(Arc::new(MemoryStore::new()), scheme));
    let mut ch = KeepsOldUploads {
        inner: LocalChannel::new(store()),
        old: LocalChannel::new(store()),
        puts: 0,
        attack: Box::new(|_, _| {}),
    };
    client.upload(&mut rng, &mut ch, &docs, true).unwrap();
    docs[0].fields = second;
    docs[0].body = b"the second upload".to_vec();
    client.upload(&mut rng, &mut ch, &docs[..1], false).unwrap();
    assert_eq!(
        client.search(&mut rng, &mut ch, q).unwrap(),
        oracle(&docs, q)
    );
    ch.attack = Box::new(attack);
    client.search(&mut rng, &mut ch, q)
}

/// The server answers for a re-uploaded document from its first upload,
/// which matched the query (the second does not). Before versions were
/// bound, the client accepted the old document as a verified match.
#[test]
fn malicious_answer_from_an_older_upload_is_caught() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let first = corpus(&mut rng, 6).remove(0);
    let q = Conjunction::new(vec![(0, first.fields[0].clone())]);
    let second: Vec<Vec<u8>> = (0..N).map(|j| format!("other{j}").into_bytes()).collect();
    let r = against_a_kept_upload(second, &q, |hits, old| {
        let i = hits.iter().position(|h| h.id == 100).unwrap();
        let o = old.iter().find(|h| h.id == 100).unwrap();
        assert!(o.matched && !hits[i].matched);
        hits[i] = o.clone();
    });
    assert!(matches!(r, Err(Error::Crypto)), "not caught: {r:?}");
}

/// The second upload matches and the first does not; the server answers
/// "no match" with a proof that takes C0 from the first upload and the
/// C_j from the second (their relation fails, as for a true miss). Before
/// versions were bound, every tag checked and the client accepted the
/// verified "no match".
#[test]
fn malicious_mix_of_two_uploads_is_caught() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let first = corpus(&mut rng, 6).remove(0);
    let second: Vec<Vec<u8>> = (0..N).map(|j| format!("other{j}").into_bytes()).collect();
    let q = Conjunction::new(vec![(0, second[0].clone())]);
    assert!(!q.matches(&first.fields));
    let r = against_a_kept_upload(second, &q, |hits, old| {
        let i = hits.iter().position(|h| h.id == 100).unwrap();
        let o = old.iter().find(|h| h.id == 100).unwrap();
        assert!(hits[i].matched && !o.matched);
        let element = conjunctive::si_sse_rv::PROOF_ELEMENT_LEN;
        let mut proof = o.proof[..element].to_vec();
        proof.extend_from_slice(&hits[i].proof[element..]);
        hits[i].proof = proof;
        hits[i].matched = false;
        hits[i].body.clear();
    });
    assert!(matches!(r, Err(Error::Crypto)), "not caught: {r:?}");
}

fn first_match(hits: &[Hit]) -> usize {
    hits.iter().position(|h| h.matched).unwrap()
}

fn first_miss(hits: &[Hit]) -> usize {
    hits.iter().position(|h| !h.matched).unwrap()
}

#[test]
fn malicious_drop_of_a_result_is_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        hits.remove(i);
    });
}

#[test]
fn malicious_drop_by_claiming_no_match_is_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        hits[i].matched = false;
        hits[i].body.clear();
    });
}

#[test]
fn malicious_drop_of_a_non_matching_entry_is_caught() {
    caught(|hits, _| {
        let i = first_miss(hits);
        hits.remove(i);
    });
}

#[test]
fn malicious_added_result_is_caught() {
    caught(|hits, _| {
        let i = first_miss(hits);
        let body = hits[first_match(hits)].body.clone();
        hits[i].matched = true;
        hits[i].body = body;
    });
}

#[test]
fn malicious_added_unknown_document_is_caught() {
    caught(|hits, _| {
        let mut h = hits[first_match(hits)].clone();
        h.id = 9_999;
        hits.push(h);
    });
}

#[test]
fn malicious_replayed_result_is_caught() {
    caught(|hits, _| {
        let h = hits[first_match(hits)].clone();
        hits.push(h);
    });
}

#[test]
fn malicious_replay_of_an_earlier_answer_is_caught() {
    caught(|hits, old| {
        *hits = old.to_vec();
    });
}

#[test]
fn malicious_replayed_proof_from_an_earlier_query_is_caught() {
    caught(|hits, old| {
        let i = first_match(hits);
        let o = old.iter().find(|h| h.id == hits[i].id).unwrap();
        hits[i].proof = o.proof.clone();
    });
}

#[test]
fn malicious_altered_result_id_is_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        let j = first_miss(hits);
        let (a, b) = (hits[i].id, hits[j].id);
        hits[i].id = b;
        hits[j].id = a;
    });
}

#[test]
fn malicious_altered_result_body_is_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        let last = hits[i].body.len() - 1;
        hits[i].body[last] ^= 1;
    });
}

#[test]
fn malicious_swapped_result_bodies_are_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        let other = hits.iter().position(|h| h.id != hits[i].id).unwrap();
        let body = hits[i].body.clone();
        hits[other].matched = true;
        hits[other].body = body.clone();
        hits[i].body = body;
        hits.swap(i, other);
        let id = hits[i].id;
        hits[i].id = hits[other].id;
        hits[other].id = id;
    });
}

#[test]
fn malicious_altered_proof_is_caught() {
    for at in [0usize, 50, 95, 96, 100, 111, 112, 200] {
        caught(move |hits, _| {
            let i = first_match(hits);
            let k = at % hits[i].proof.len();
            hits[i].proof[k] ^= 0x01;
        });
    }
}

#[test]
fn malicious_truncated_or_swapped_proof_is_caught() {
    caught(|hits, _| {
        let i = first_match(hits);
        hits[i].proof.truncate(100);
    });
    caught(|hits, _| {
        let i = first_match(hits);
        let j = first_miss(hits);
        let p = hits[i].proof.clone();
        hits[i].proof = hits[j].proof.clone();
        hits[j].proof = p;
    });
}

#[test]
fn honest_answers_verify_for_every_query() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let docs = corpus(&mut rng, 8);
    let qs = queries(&docs, &mut rng);
    let scheme = conjunctive::algorithms_of("si-sse-rv").unwrap();
    let (mut client, mut ch, mut rng) = setup(scheme, &docs, 14);
    let before = sesame_crypto::counter::snapshot();
    for q in &qs {
        assert_eq!(
            client.search(&mut rng, &mut ch, q).unwrap(),
            oracle(&docs, q)
        );
    }
    // Search (server) and verify (client): 2 pairings per document each.
    let pairings = sesame_crypto::counter::snapshot()
        .since(&before)
        .total(sesame_crypto::counter::Primitive::Pairing);
    assert_eq!(pairings, (qs.len() * docs.len() * 4) as u64);
}

#[test]
fn verify_uses_exactly_two_pairings_per_result() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let scheme = conjunctive::algorithms_of("si-sse-rv").unwrap();
    let s = (scheme.new)(&Key::generate(&mut rng), N).unwrap();
    let fields: Vec<Vec<u8>> = (0..N).map(|j| vec![j as u8]).collect();
    let index = s.encrypt_index(&mut rng, 7, 2, &fields).unwrap();
    let q = Conjunction::new(vec![(0, vec![0]), (3, vec![3]), (4, vec![4])]);
    let token = s.token(&mut rng, &q).unwrap();
    let tester = (scheme.tester)(&token).unwrap();
    assert!(tester.matches(&index).unwrap());
    let proof = tester.prove(&index).unwrap().unwrap();
    let before = sesame_crypto::counter::snapshot();
    s.verify(&token, 7, 2, true, &proof).unwrap();
    let used = sesame_crypto::counter::snapshot().since(&before);
    assert_eq!(used.total(sesame_crypto::counter::Primitive::Pairing), 2);
    assert!(matches!(
        s.verify(&token, 8, 2, true, &proof),
        Err(Error::Crypto)
    ));
    assert!(matches!(
        s.verify(&token, 7, 2, false, &proof),
        Err(Error::Crypto)
    ));
    // The proof of upload 2 is not one of upload 1 or 3.
    for version in [1, 3] {
        assert!(matches!(
            s.verify(&token, 7, version, true, &proof),
            Err(Error::Crypto)
        ));
    }
}

#[test]
fn client_state_survives_a_restart() {
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let docs = corpus(&mut rng, 6);
    let q = Conjunction::new(vec![(0, docs[0].fields[0].clone())]);
    for scheme in conjunctive::algorithms() {
        let (client, mut ch, mut rng) = setup(scheme, &docs, 15);
        let saved = client.save_state().unwrap();
        drop(client);
        let mut client = SiClient::restore(&saved).unwrap();
        assert_eq!(client.ids().len(), docs.len());
        let got = client.search(&mut rng, &mut ch, &q).unwrap();
        assert_eq!(got, oracle(&docs, &q), "{}", scheme.descriptor.name);
        assert!(SiClient::restore(&saved[..saved.len() - 1]).is_err());
    }
}
