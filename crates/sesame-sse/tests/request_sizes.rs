//! Every request a keyword scheme sends to build its index (setup) or
//! prepares for an update fits [`MAX_PREPARED_REQUEST`], however many
//! keywords a document has, so that the SDK can send it under any
//! server's message limit; and the index still answers like a plaintext
//! one. Dynamic schemes are built (setup) the same way, and each is
//! checked the same.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Meter, Params, Result, SchemeKind};
use sesame_sse::{KeywordScheme, Multimap, UpdateOp, MAX_PREPARED_REQUEST};
use sesame_store::MemoryStore;

/// Distinct keywords of the large document: megabytes of index entries.
const WORDS: usize = 60_000;

/// A channel that remembers the size of the largest request it carried.
struct Recording<C> {
    inner: C,
    largest: usize,
}

impl<C: Channel> Channel for Recording<C> {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        self.largest = self.largest.max(request.len());
        self.inner.call(request)
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

fn words() -> Vec<Vec<u8>> {
    (0..WORDS).map(|i| format!("w{i}").into_bytes()).collect()
}

fn schemes(kind: SchemeKind) -> Vec<KeywordScheme> {
    sesame_sse::schemes()
        .into_iter()
        .filter(|s| s.descriptor.kind == kind)
        .collect()
}

#[test]
fn setup_requests_fit_the_bound() {
    let mut db = Multimap::new();
    for w in words() {
        db.insert(w, vec![1]);
    }
    db.insert(b"common".to_vec(), vec![1, 2, 3]);
    let all = schemes(SchemeKind::StaticSse)
        .into_iter()
        .chain(schemes(SchemeKind::DynamicSse));
    for scheme in all {
        let name = scheme.descriptor.name;
        let started = std::time::Instant::now();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        let store = Arc::new(MemoryStore::new());
        let mut channel = Recording {
            inner: support::channel(&scheme, store),
            largest: 0,
        };
        client.setup(&mut rng, &mut channel, &db).unwrap();
        assert!(
            channel.largest <= MAX_PREPARED_REQUEST,
            "{name}: a setup request of {} bytes",
            channel.largest
        );
        for (w, want) in [
            ("w0", vec![1]),
            ("w59999", vec![1]),
            ("common", vec![1, 2, 3]),
        ] {
            let ids = client.search(&mut rng, &mut channel, w.as_bytes()).unwrap();
            assert_eq!(ids, want, "{name} {w}");
        }
        eprintln!("{name}: {:?}", started.elapsed());
    }
}

#[test]
fn prepared_update_requests_fit_the_bound() {
    let words = words();
    let mut checked = 0;
    for scheme in schemes(SchemeKind::DynamicSse) {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        if !client.prepares_updates() {
            continue;
        }
        let store = Arc::new(MemoryStore::new());
        let mut channel = support::channel(&scheme, store);
        let requests = client
            .prepare_update_interactive(&mut rng, &mut channel, UpdateOp::Add, 1, &words)
            .unwrap()
            .unwrap();
        let largest = requests.iter().map(Vec::len).max().unwrap_or(0);
        assert!(
            largest <= MAX_PREPARED_REQUEST,
            "{name}: a prepared request of {largest} bytes"
        );
        assert!(requests.len() > 1, "{name}: {} request(s)", requests.len());
        // Applied (the first twice, as after a lost answer), the index
        // answers.
        for r in requests.iter().take(1).chain(&requests) {
            client
                .check_update_response(&channel.call(r).unwrap())
                .unwrap();
        }
        for w in ["w0", "w31337", "w59999"] {
            let ids = client.search(&mut rng, &mut channel, w.as_bytes()).unwrap();
            assert_eq!(ids, vec![1], "{name} {w}");
        }
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} schemes checked");
}
