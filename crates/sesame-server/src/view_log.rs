//! `sesame serve --record-view FILE`: the server's view, written down.
//!
//! A research and debugging feature that must never run in production:
//! the file holds what an attacker who controls the server would see
//! (every scheme request and response, every store key read and written
//! with its value's size, the documents' keys), which is the input of the
//! leakage attacks (`sesame-attacks`, `docs/attacks.md`).
//!
//! One JSON object per line, one line per operation:
//!
//! ```json
//! {"tenant":"t","index":"p1a2b3c4d-default","method":"Call","events":[
//!   {"request":"01ab…"},{"read":"692f…","size":48},{"write":"692f…","size":48},
//!   {"response":"01…"}]}
//! ```
//!
//! Keys and messages are hex; `size` is `null` for a key read and not
//! found. The file is created new (never appended to or replaced), mode
//! 600, and each line is flushed when its operation ends.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use sesame_core::view::Event;

use crate::error::EngineError;

/// The open view file.
#[derive(Debug)]
pub struct ViewLog {
    file: Mutex<BufWriter<File>>,
}

impl ViewLog {
    /// Creates `path` (it must not exist), readable by its owner only.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(path)?;
        Ok(ViewLog {
            file: Mutex::new(BufWriter::new(file)),
        })
    }

    /// Writes one operation's events as a line.
    pub fn operation(
        &self,
        tenant: &str,
        index: &str,
        method: &str,
        events: &[Event],
    ) -> Result<(), EngineError> {
        let mut line = String::with_capacity(128 + 64 * events.len());
        line.push_str("{\"tenant\":");
        line.push_str(&json_string(tenant));
        line.push_str(",\"index\":");
        line.push_str(&json_string(index));
        line.push_str(",\"method\":");
        line.push_str(&json_string(method));
        line.push_str(",\"events\":[");
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&event_json(e));
        }
        line.push_str("]}\n");
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| EngineError::Internal(format!("the view file cannot be written: {e}")))
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn event_json(e: &Event) -> String {
    let size = |s: &Option<usize>| s.map_or("null".to_owned(), |n| n.to_string());
    match e {
        Event::Request(r) => format!("{{\"request\":\"{}\"}}", hex::encode(r)),
        Event::Response(r) => format!("{{\"response\":\"{}\"}}", hex::encode(r)),
        Event::Read { key, size: s } => {
            format!("{{\"read\":\"{}\",\"size\":{}}}", hex::encode(key), size(s))
        }
        Event::Write { key, size: s } => {
            format!("{{\"write\":\"{}\",\"size\":{s}}}", hex::encode(key))
        }
        Event::Delete { key } => format!("{{\"delete\":\"{}\"}}", hex::encode(key)),
        Event::Scan { prefix, found } => {
            format!("{{\"scan\":\"{}\",\"found\":{found}}}", hex::encode(prefix))
        }
        _ => "{}".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_json_lines_and_the_file_is_new_and_private() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let path = tmp.path().join("view.jsonl");
        let log = ViewLog::create(&path).expect("created");
        log.operation(
            "t",
            "i\"x",
            "Call",
            &[
                Event::Request(vec![1, 2]),
                Event::Read {
                    key: b"k".to_vec(),
                    size: None,
                },
                Event::Write {
                    key: b"k".to_vec(),
                    size: 3,
                },
                Event::Response(vec![255]),
            ],
        )
        .expect("written");
        let text = std::fs::read_to_string(&path).expect("read back");
        let v: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(v["index"], "i\"x");
        assert_eq!(v["events"][0]["request"], "0102");
        assert_eq!(v["events"][1]["size"], serde_json::Value::Null);
        assert_eq!(v["events"][2]["size"], 3);
        assert_eq!(v["events"][3]["response"], "ff");
        assert!(
            ViewLog::create(&path).is_err(),
            "an existing file is not reused"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
    }
}
