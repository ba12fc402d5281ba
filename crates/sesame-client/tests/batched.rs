//! Updates prepared in batches (`KeywordClient::batches_updates`: Aura):
//! an add of more documents than one pending intent holds, and of more
//! keywords than one prepared batch, answers exactly as FAST (which
//! prepares one document at a time) and as the files say, through a sync
//! that replaces documents and a removal, and leaves no intent pending.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use sesame_client::{insecure, Profile, Session, DEFAULT_INDEX};
use sesame_core::Params;

const PASS: &str = "correct horse battery staple";
const VOCABULARY: usize = 400;

/// Document `i` of `version`: 60 words of the vocabulary.
fn words_of(i: usize, version: usize) -> BTreeSet<String> {
    (0..60)
        .map(|j| format!("v{}", (i * 31 + j * 7 + version * 13) % VOCABULARY))
        .collect()
}

fn write(root: &Path, i: usize, version: usize) -> PathBuf {
    let path = root.join(format!("f{i}.txt"));
    let text: Vec<String> = words_of(i, version).into_iter().collect();
    fs::write(&path, text.join(" ")).unwrap();
    path
}

fn session(dir: &Path, scheme: &str) -> Session {
    Profile::create_with_kdf(dir, PASS, scheme, &Params::new(), insecure::fast_kdf())
        .unwrap()
        .session(DEFAULT_INDEX)
        .unwrap()
}

fn hits(s: &mut Session, word: &str) -> BTreeSet<String> {
    s.search(word)
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect()
}

#[test]
fn aura_batches_answer_as_fast_and_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    fs::create_dir_all(&docs).unwrap();
    // 700 documents (past the 512 of an intent), 42,000 keywords (past the
    // 32,768 of a prepared batch).
    let mut version: BTreeMap<usize, usize> = (0..700).map(|i| (i, 0)).collect();
    for &i in version.keys() {
        write(&docs, i, 0);
    }
    let mut aura = session(&tmp.path().join("aura"), "aura");
    let mut fast = session(&tmp.path().join("fast"), "fast");
    for s in [&mut aura, &mut fast] {
        s.add_documents(&[&docs], &mut |_| {}).unwrap();
    }
    // A sync: changed files (the old version's keywords deleted and the
    // new one's added in the same intent) and removed ones.
    for i in (0..700).step_by(9) {
        version.insert(i, 1);
        write(&docs, i, 1);
    }
    let mut removed = Vec::new();
    for i in (4..700).step_by(50) {
        version.remove(&i);
        let path = docs.join(format!("f{i}.txt"));
        removed.push(path.to_string_lossy().into_owned());
        fs::remove_file(path).unwrap();
    }
    for s in [&mut aura, &mut fast] {
        s.add_documents(&[&docs], &mut |_| {}).unwrap();
        s.remove_documents(&removed).unwrap();
    }
    for word in ["v0", "v7", "v13", "v200", "v399", "absent"] {
        let expected: BTreeSet<String> = version
            .iter()
            .filter(|(&i, &v)| words_of(i, v).contains(word))
            .map(|(i, _)| {
                docs.join(format!("f{i}.txt"))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(hits(&mut aura, word), expected, "aura, {word}");
        assert_eq!(hits(&mut fast, word), expected, "fast, {word}");
        assert_eq!(expected.is_empty(), word == "absent");
    }
    for dir in ["aura", "fast"] {
        let intents = tmp.path().join(dir).join("indexes");
        let pending: Vec<_> = walk(&intents)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("intent"))
            .collect();
        assert!(pending.is_empty(), "{dir}: {pending:?}");
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
