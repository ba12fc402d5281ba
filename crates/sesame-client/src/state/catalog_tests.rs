//! Tests of the catalog on disk (module `runs`): its memory, its answers
//! across saves, the formats before it, and what a restored, swapped or
//! half-written catalog file does.

use super::*;
use rand::{Rng, SeedableRng};
use rand_core::OsRng;
use std::collections::HashSet;

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

/// Finding a batch of names (`with_paths`, what each import batch and
/// `add` do) reads a number of catalog blocks bounded by the batch and
/// the number of runs, not by the catalog's size: at 100,000 and
/// 400,000 entries (nearly: 15/16 of it), in 4 runs, for a batch of 16 names (some present,
/// some not), at most 2 blocks per name and run are read, and the
/// answer is the entries of those names in identifier order.
#[test]
fn a_batch_finds_its_names_in_blocks_bounded_by_the_batch() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    // A cache of one block: every block a lookup needs is read.
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(2_048, 1);
    for n in [100_000u64, 400_000] {
        let mut state = state_of(n / 2);
        save(&cipher, &path, &state);
        // More runs (of n/4, n/8 and n/16 entries: none merged), some
        // entries removed or renamed in later runs.
        let mut top = n / 2;
        for step in 0..3u64 {
            for id in top + 1..=top + ((n / 4) >> step) {
                state.catalog.insert(id, doc(id));
            }
            top += (n / 4) >> step;
            state.catalog.remove(&(7 + step));
            let mut renamed = doc(11 + step);
            renamed.path = format!("renamed {step}");
            state.catalog.insert(11 + step, renamed);
            save(&cipher, &path, &state);
        }
        let loaded = load(&cipher, &path);
        let runs_named = loaded.catalog.run_refs().len() as u64;
        let wanted: Vec<u64> = vec![3, 7, 9, 11, 12, n / 3, n / 2, n / 2 + 1, top - 1, top];
        let mut names: Vec<String> = wanted.iter().map(|id| doc(*id).path).collect();
        names.extend((0..5).map(|i| format!("absent {i}")));
        names.push("renamed 1".into());
        let set: HashSet<&str> = names.iter().map(String::as_str).collect();
        let before = loaded.catalog.blocks_read();
        let found = loaded
            .catalog
            .with_paths(&set)
            .unwrap_or_else(|e| panic!("{e}"));
        let read = loaded.catalog.blocks_read() - before;
        let ids: Vec<u64> = found.iter().map(|d| d.id).collect();
        // 7 and 9 removed, 11 and 12 renamed ("renamed 1" is 12).
        assert_eq!(ids, vec![3, 12, n / 3, n / 2, n / 2 + 1, top - 1, top]);
        assert_eq!(runs_named, 4);
        let bound = 2 * set.len() as u64 * runs_named;
        assert!(
            read <= bound,
            "{read} blocks read to find {} names in {n} entries ({runs_named} runs; at most {bound})",
            set.len()
        );
    }
}

/// Every name of a catalog of `n` entries (a batch reading every name
/// block).
fn all_names(n: u64) -> Vec<String> {
    (1..=n).map(|id| doc(id).path).collect()
}

/// What a catalog refuses of its name index (module `names`): a name
/// block swapped with another of the same run, one taken from another
/// run (of the same index and key) at the place of one of this run, and one cut short (half
/// written): each is [`ClientError::StateCorrupt`] naming the run's
/// file when a batch reads it, and nothing of it is used.
#[test]
fn a_swapped_or_cut_name_block_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let elsewhere = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let other = elsewhere.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(2_000, 1 << 20);
    let n = 20_000;
    save(&cipher, &path, &state_of(n));
    save(&cipher, &other, &state_of(n));
    let (file, other_file) = (runs(&path)[0].clone(), runs(&other)[0].clone());
    assert_ne!(file, other_file);
    let blocks_of = |p: &Path| {
        load(&cipher, p).catalog.name_blocks()[0]
            .clone()
            .unwrap_or_else(|| panic!("no name index"))
    };
    let (ours, theirs) = (blocks_of(&path), blocks_of(&other));
    assert!(ours.len() >= 50, "{} name blocks", ours.len());
    let good = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
    let theirs_bytes = std::fs::read(&other_file).unwrap_or_else(|e| panic!("{e}"));
    let names = all_names(n);
    let set: HashSet<&str> = names.iter().map(String::as_str).collect();
    let refused = |what: &str, bytes: &[u8]| {
        std::fs::write(&file, bytes).unwrap_or_else(|e| panic!("{e}"));
        let loaded = load(&cipher, &path);
        match loaded.catalog.with_paths(&set) {
            Err(ClientError::StateCorrupt { path: at, .. }) => assert_eq!(at, file, "{what}"),
            Err(e) => panic!("{what}: {e}"),
            Ok(found) => panic!("{what}: read as {} entries", found.len()),
        }
    };
    let range = |(offset, len): (u64, u32)| offset as usize..offset as usize + len as usize;
    // Two blocks of the same length swapped.
    let (i, j) = (0..ours.len())
        .flat_map(|i| (i + 1..ours.len()).map(move |j| (i, j)))
        .find(|&(i, j)| ours[i].1 == ours[j].1)
        .unwrap_or_else(|| panic!("no two name blocks of one length"));
    let mut swapped = good.clone();
    let (a, b) = (range(ours[i]), range(ours[j]));
    let first = swapped[a.clone()].to_vec();
    swapped.copy_within(b.clone(), a.start);
    swapped[b].copy_from_slice(&first);
    refused("swapped", &swapped);
    // A block of another run (of another index state) in its place.
    let (i, j) = (0..ours.len())
        .flat_map(|i| (0..theirs.len()).map(move |j| (i, j)))
        .find(|&(i, j)| ours[i].1 == theirs[j].1)
        .unwrap_or_else(|| panic!("no name blocks of one length"));
    let mut taken = good.clone();
    taken[range(ours[i])].copy_from_slice(&theirs_bytes[range(theirs[j])]);
    refused("taken from another run", &taken);
    // The second half of a block never written.
    let mut cut = good.clone();
    let half = range(ours[ours.len() / 2]);
    cut[half.start + half.len() / 2..half.end].fill(0);
    refused("half written", &cut);
    // As written, every name is found.
    std::fs::write(&file, &good).unwrap_or_else(|e| panic!("{e}"));
    let found = load(&cipher, &path)
        .catalog
        .with_paths(&set)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.len(), n as usize);
}

/// States of formats 5 and 6 whose runs earlier builds wrote load, and a
/// batch finds its names in them: runs written before the name index
/// (`SSMCAT01`, read whole) and runs of 64-bit name hashes with blocks in
/// the wire form (`SSMCAT02`); the runs a later save merges are written
/// in this build's layout (`SSMCAT03`: 32-bit name hashes, compact
/// blocks), and answer the same.
#[test]
fn states_with_runs_of_earlier_layouts_load_and_migrate() {
    for layout in [1u8, 2] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("t.state");
        let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p")
            .with_catalog(1_000, 1 << 20)
            .with_log_from(4 * 1024);
        runs::WRITE_EARLIER.with(|w| w.set(Some(layout)));
        let mut state = state_of(4_000);
        save(&cipher, &path, &state);
        for id in 4_001..=5_000 {
            state.catalog.insert(id, doc(id));
        }
        save(&cipher, &path, &state);
        runs::WRITE_EARLIER.with(|w| w.set(None));
        let magics = || -> Vec<[u8; 8]> {
            let mut out: Vec<[u8; 8]> = std::fs::read_dir(dir.path())
                .unwrap_or_else(|e| panic!("{e}"))
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".catalog"))
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_else(|e| panic!("{e}"));
                    let mut m = [0u8; 8];
                    m.copy_from_slice(&bytes[..8]);
                    m
                })
                .collect();
            out.sort();
            out
        };
        let earlier = if layout == 1 {
            *b"SSMCAT01"
        } else {
            *b"SSMCAT02"
        };
        assert_eq!(magics(), vec![earlier; 2], "layout {layout}");
        let wanted = |state: &IndexState| {
            let names: Vec<String> = [1u64, 2_500, 4_000, 4_001, 5_000]
                .iter()
                .map(|id| doc(*id).path)
                .collect();
            let set: HashSet<&str> = names.iter().map(String::as_str).collect();
            let found = state
                .catalog
                .with_paths(&set)
                .unwrap_or_else(|e| panic!("{e}"));
            found.iter().map(|d| (d.id, d.digest)).collect::<Vec<_>>()
        };
        let mut loaded = load(&cipher, &path);
        let before = loaded.catalog.name_blocks();
        assert_eq!(before.len(), 2, "two runs");
        assert!(
            before.iter().all(|n| n.is_some() == (layout == 2)),
            "runs of layout {layout}"
        );
        let want: Vec<_> = [1u64, 2_500, 4_000, 4_001, 5_000]
            .iter()
            .map(|&id| (id, doc(id).digest))
            .collect();
        assert_eq!(wanted(&loaded), want);
        // A run as large as the newest: the newest runs merge into one.
        for id in 5_001..=9_000 {
            loaded.catalog.insert(id, doc(id));
        }
        let full = DocumentInfo {
            digest: Some([0xab; 32]),
            ..doc(9_001)
        };
        loaded.catalog.insert(9_001, full);
        save(&cipher, &path, &loaded);
        assert_eq!(magics(), vec![*b"SSMCAT03"], "merged into one run");
        let again = load(&cipher, &path);
        assert!(
            again.catalog.name_blocks().iter().all(Option::is_some),
            "the merged run has a name index"
        );
        assert_eq!(wanted(&again), want);
        // The merged run keeps the first 16 bytes of a digest, and they
        // match the whole digest (and no other).
        let kept = again
            .catalog
            .get(&9_001)
            .unwrap_or_else(|e| panic!("{e}"))
            .and_then(|d| d.digest)
            .unwrap_or_else(|| panic!("no digest kept"));
        assert_eq!(kept[..16], [0xab; 16]);
        assert_eq!(kept[16..], [0; 16]);
        assert!(digest_matches(&kept, &[0xab; 32]));
        let mut other = [0xab; 32];
        other[15] = 0;
        assert!(!digest_matches(&kept, &other));
        assert_eq!(again.catalog.len(), 9_001);
    }
}

/// A run of more name pairs than its writer sorts in memory
/// ([`names::SPILL_AT`], 5,000 in tests) sorts them in segments on
/// disk: every name is found, and the spill file is gone once the run
/// is written; one a killed writer left is deleted by the next save.
#[test]
fn a_run_larger_than_memory_sorts_its_names_in_segments() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.state");
    let cipher = StateCipher::new(&Key::from_bytes([9; 32]), "p").with_catalog(1_000, 1 << 20);
    let n = 5 * names::SPILL_AT as u64 + 123;
    let mut state = state_of(n);
    save(&cipher, &path, &state);
    let spills = || {
        std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".namespill"))
            .count()
    };
    assert_eq!(spills(), 0, "a spill file was left");
    let names = all_names(n);
    let set: HashSet<&str> = names.iter().step_by(7).map(String::as_str).collect();
    let loaded = load(&cipher, &path);
    let found = loaded
        .catalog
        .with_paths(&set)
        .unwrap_or_else(|e| panic!("{e}"));
    let want: Vec<u64> = (1..=n).step_by(7).collect();
    assert!(found.iter().map(|d| d.id).eq(want.iter().copied()));
    // What a writer killed while it spilled leaves.
    let left = names::spill_path(&path, &[7; 16]);
    std::fs::write(&left, b"half a segment").unwrap_or_else(|e| panic!("{e}"));
    for id in n + 1..=n + 1_000 {
        state.catalog.insert(id, doc(id));
    }
    save(&cipher, &path, &state);
    assert_eq!(spills(), 0, "a killed writer's spill file was left");
}
