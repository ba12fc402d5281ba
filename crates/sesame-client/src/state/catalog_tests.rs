//! Tests of the catalog on disk (module `runs`): its memory, its answers
//! across saves, the formats before it, and what a restored, swapped or
//! half-written catalog file does.

use super::*;
use rand::{Rng, SeedableRng};
use rand_core::OsRng;

use super::tests::{doc, state_of};

fn save(cipher: &StateCipher, path: &Path, state: &IndexState) {
    cipher
        .save(&mut OsRng, path, "t", state)
        .unwrap_or_else(|e| panic!("{e}"));
}

fn load(cipher: &StateCipher, path: &Path) -> IndexState {
    cipher.load(path, "t").unwrap_or_else(|e| panic!("{e}"))
}

/// The catalog files beside the state file `path`, by name.
fn runs(path: &Path) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or_else(|| panic!("no folder"));
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "catalog"))
        .collect();
    out.sort();
    out
}

fn entries(state: &IndexState) -> Vec<(u64, DocumentInfo)> {
    state
        .catalog
        .iter()
        .collect::<Result<_>>()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A catalog saved and loaded again, then read whole, holds at most
/// a bounded number of bytes in memory whatever its size: its
/// entries are on disk beside the state, a bounded cache of them in
/// memory.
#[test]
fn a_loaded_catalog_holds_bounded_memory_whatever_its_size() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p");
    for n in [50_000u64, 400_000] {
        save(&cipher, &path, &state_of(n));
        let loaded = load(&cipher, &path);
        assert_eq!(loaded.catalog.len(), n as usize);
        assert_eq!(loaded.catalog.values().flatten().count(), n as usize);
        assert_eq!(
            loaded.catalog.get(&(n / 2)).ok().flatten(),
            Some(doc(n / 2))
        );
        let bytes = loaded.catalog.heap_bytes();
        assert!(
            bytes <= 24 << 20,
            "{bytes} bytes of catalog in memory for {n} entries ({} per entry)",
            bytes as u64 / n
        );
    }
}

/// Random puts and removals (mostly new identifiers, some replaced,
/// some removed), saved every few hundred changes with runs written
/// from 200 overlay entries and merged, answer as a `BTreeMap` after
/// every load; merged runs' files are deleted.
#[test]
fn the_catalog_on_disk_answers_as_a_btreemap_across_saves() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p")
        .with_catalog(200, 64 * 1024)
        .with_log_from(4 * 1024);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(39);
    let mut oracle = BTreeMap::new();
    let mut state = state_of(0);
    for round in 0..12u64 {
        for step in 0..250u64 {
            let id = match rng.gen_range(0..10) {
                0..=6 => 1_000 + round * 250 + step,
                _ => rng.gen_range(0..1_000 + round * 250),
            };
            if rng.gen_range(0..5) == 0 {
                assert_eq!(state.catalog.remove(&id), oracle.remove(&id));
            } else {
                assert_eq!(
                    state.catalog.insert(id, doc(id)),
                    oracle.insert(id, doc(id))
                );
            }
        }
        save(&cipher, &path, &state);
        if round % 3 == 2 {
            state = load(&cipher, &path);
        }
        assert_eq!(state.catalog.len(), oracle.len(), "round {round}");
        let want: Vec<(u64, DocumentInfo)> = oracle.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert!(entries(&state) == want, "round {round}");
        for id in (0..1_000 + round * 250).step_by(13) {
            assert_eq!(
                state.catalog.get(&id).ok().flatten().as_ref(),
                oracle.get(&id)
            );
        }
    }
    let named = state.catalog.run_refs();
    assert!(named.len() >= 2, "{} runs", named.len());
    assert!(
        named.len() <= 8,
        "{} runs: merging keeps about log2 of them",
        named.len()
    );
    assert_eq!(
        runs(&path).len(),
        named.len(),
        "files of merged runs were left"
    );
}

/// States of formats 3 and 4 (the catalog inside the state), as the
/// code before the catalog on disk wrote them, load with their
/// catalog; the first save writes format 5 or 6 and the catalog as
/// runs, and loads as it was.
#[test]
fn states_of_formats_3_and_4_load_and_are_migrated_by_the_next_save() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(1_000, 1 << 20);
    for format in [3u8, 4] {
        for f in runs(&path) {
            let _ = std::fs::remove_file(f);
        }
        let old = state_of(5_000);
        let plain = wire::encode(&old).unwrap_or_else(|e| panic!("{e}"));
        if format == 3 {
            let sealed = cipher
                .aead
                .seal(&mut OsRng, &cipher.aad(3, "t", "fast"), &plain)
                .unwrap_or_else(|e| panic!("{e:?}"));
            let file = [MAGIC.as_slice(), &[4], b"fast", &sealed].concat();
            std::fs::write(&path, file).unwrap_or_else(|e| panic!("{e}"));
        } else {
            cipher
                .start_log_as(&mut OsRng, 4, &path, "t", "fast", &plain)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let loaded = load(&cipher, &path);
        assert!(entries(&loaded) == entries(&old), "format {format}");
        assert_eq!(loaded.next_doc, 5_001);
        save(&cipher, &path, &loaded);
        let magic = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            magic.starts_with(MAGIC_V5) || magic.starts_with(MAGIC_LOGGED),
            "format {format} was not migrated"
        );
        assert_eq!(
            runs(&path).len(),
            1,
            "format {format}: the catalog as a run"
        );
        let again = load(&cipher, &path);
        assert!(
            entries(&again) == entries(&old),
            "format {format} after migration"
        );
    }
}

/// What a state refuses of its catalog files: a run missing (the
/// catalog folder restored from a copy older than the state), a run
/// of an earlier save put back under the name of the current one, and
/// a block of another run or position swapped in: each is
/// [`ClientError::StateCorrupt`] or a clear error naming the file,
/// and no entry of it is used.
#[test]
fn a_restored_or_swapped_catalog_file_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(2_000, 1 << 20);
    let mut state = state_of(3_000);
    save(&cipher, &path, &state);
    let first = runs(&path);
    assert_eq!(first.len(), 1);
    let old_bytes = std::fs::read(&first[0]).unwrap_or_else(|e| panic!("{e}"));
    let old_state = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    for id in 3_001..=6_000 {
        state.catalog.insert(id, doc(id));
        state.catalog.remove(&(id - 2_999));
    }
    save(&cipher, &path, &state);
    let now = runs(&path);
    assert!(!now.contains(&first[0]), "the first run was merged away");
    let good: Vec<(PathBuf, Vec<u8>)> = now
        .iter()
        .map(|p| {
            (
                p.clone(),
                std::fs::read(p).unwrap_or_else(|e| panic!("{e}")),
            )
        })
        .collect();
    let put_back = || {
        for f in runs(&path) {
            let _ = std::fs::remove_file(f);
        }
        for (p, b) in &good {
            std::fs::write(p, b).unwrap_or_else(|e| panic!("{e}"));
        }
    };

    // The catalog folder as it was after the first save.
    for f in runs(&path) {
        let _ = std::fs::remove_file(f);
    }
    std::fs::write(&first[0], &old_bytes).unwrap_or_else(|e| panic!("{e}"));
    match cipher.load(&path, "t") {
        Err(e) => assert!(e.to_string().contains("is missing"), "{e}"),
        Ok(s) => panic!("an older catalog opened, with {} entries", s.catalog.len()),
    }
    // The older run under the current run's name.
    put_back();
    let (newest, _) = good.last().unwrap_or_else(|| panic!("no run"));
    std::fs::write(newest, &old_bytes).unwrap_or_else(|e| panic!("{e}"));
    match cipher.load(&path, "t") {
        Err(ClientError::StateCorrupt { path: p, .. }) => assert_eq!(&p, newest),
        Err(e) => panic!("{e}"),
        Ok(s) => panic!("an older catalog opened, with {} entries", s.catalog.len()),
    }
    // A block of the same size from elsewhere in the file (the
    // footer left as it was): found when the block is read.
    put_back();
    let (p, bytes) = good.last().unwrap_or_else(|| panic!("no run"));
    let mut swapped = bytes.clone();
    let block = 1_000;
    let (a, b) = (8..8 + block, 8 + block..8 + 2 * block);
    let first_part = swapped[a.clone()].to_vec();
    swapped.copy_within(b.clone(), a.start);
    swapped[b].copy_from_slice(&first_part);
    std::fs::write(p, &swapped).unwrap_or_else(|e| panic!("{e}"));
    let loaded = load(&cipher, &path);
    let read: Result<Vec<DocumentInfo>> = loaded.catalog.values().collect();
    match read {
        Err(ClientError::StateCorrupt { path: at, .. }) => assert_eq!(&at, p),
        Err(e) => panic!("{e}"),
        Ok(v) => panic!("a swapped block read as {} entries", v.len()),
    }
    // The older state file with the newer catalog: its run is gone.
    put_back();
    std::fs::write(&path, &old_state).unwrap_or_else(|e| panic!("{e}"));
    assert!(cipher.load(&path, "t").is_err(), "an older state opened");
}

/// A save stopped between writing its runs and replacing the state
/// file (the state file and the runs of the save before put back
/// beside the new runs: what a kill there leaves) loads as the state
/// before it, the new runs named by no state; the next save deletes
/// them.
#[test]
fn a_save_stopped_between_its_run_and_its_state_leaves_the_state_before_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(1_000, 1 << 20);
    let mut state = state_of(1_500);
    save(&cipher, &path, &state);
    let before: Vec<(PathBuf, Vec<u8>)> = runs(&path)
        .into_iter()
        .chain([path.clone()])
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{e}"));
            (p, bytes)
        })
        .collect();
    for id in 1_501..=3_000 {
        state.catalog.insert(id, doc(id));
    }
    state.next_doc = 3_001;
    save(&cipher, &path, &state);
    let written = runs(&path);
    for (p, bytes) in &before {
        std::fs::write(p, bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        runs(&path).len() > written.len(),
        "the merged runs were not deleted"
    );
    let mut older = load(&cipher, &path);
    assert_eq!(older.catalog.len(), 1_500);
    assert_eq!(older.next_doc, 1_501);
    assert_eq!(older.catalog.get(&2_000).ok().flatten(), None);
    older.catalog.insert(9_000, doc(9_000));
    save(&cipher, &path, &older);
    assert_eq!(runs(&path).len(), older.catalog.run_refs().len());
    assert!(
        written.iter().all(|p| !p.exists()),
        "a run no state names was kept"
    );
    let again = load(&cipher, &path);
    assert_eq!(again.catalog.len(), 1_501);
}
