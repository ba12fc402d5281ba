//! Issue 43.6: the admin port under a flood that exhausts the process's
//! file descriptors. A failed accept must pause, not be retried at once:
//! the process's CPU time while the flood holds every descriptor stays
//! low. Alone in its binary: it lowers the whole process's descriptor
//! limit (with `prlimit`) and reads the whole process's CPU time.

#![allow(clippy::unwrap_used)]

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use rand_core::OsRng;
use sesame_server::{RunningServer, ServerConfig, Tokens};

/// User plus system CPU time of this process, in clock ticks, read from
/// `/proc/self/stat` opened before (no descriptor is free to open it).
fn cpu_ticks(file: &mut std::fs::File) -> u64 {
    use std::io::{Read, Seek};
    file.rewind().unwrap();
    let mut stat = String::new();
    file.read_to_string(&mut stat).unwrap();
    // Fields after the command name (which may hold spaces) start at ")".
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn a_flood_of_admin_connections_out_of_descriptors_does_not_spin() {
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("admin_flood: skipped (no /proc)");
        return;
    }
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new()
        .with("t", &Tokens::generate(&mut OsRng))
        .unwrap();
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    let server = RunningServer::start(config, Arc::new(sesame_store::MemoryStore::new())).unwrap();
    let admin = server.bound().admin.unwrap();
    let pid = std::process::id().to_string();
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid, "--nofile=256:256"])
        .status()
        .is_ok_and(|s| s.success());
    if !limited {
        eprintln!("admin_flood: skipped (prlimit could not lower the descriptor limit)");
        return;
    }
    // Connect until this process runs out of descriptors (bounded: the
    // limit is 256), then once more after giving one back, so that a
    // connection waits that the server cannot accept.
    let mut stat = std::fs::File::open("/proc/self/stat").unwrap();
    let mut held = Vec::new();
    while held.len() < 300 {
        match TcpStream::connect(admin) {
            Ok(s) => held.push(s),
            Err(_) => break,
        }
    }
    assert!(held.len() < 300, "the descriptor limit did not apply");
    std::thread::sleep(Duration::from_millis(200));
    held.pop();
    if let Ok(s) = TcpStream::connect(admin) {
        held.push(s);
    }
    // Fill every descriptor the server's accepts gave back.
    while let Ok(s) = TcpStream::connect(admin) {
        held.push(s);
        if held.len() > 300 {
            break;
        }
    }
    let before = cpu_ticks(&mut stat);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(&mut stat) - before;
    drop(held);
    // A loop retrying the failed accept at once takes a whole core: about
    // 100 ticks per second. Pausing, it takes next to nothing.
    assert!(
        used < 30,
        "the process used {used} clock ticks of CPU in one second while the admin port could \
         not accept"
    );
    drop(server);
}
