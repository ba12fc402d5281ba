//! Runs range queries on a table, for profiling (`perf record`):
//! `table_queries PROFILE_DIR TABLE FIELD LO HI WIDTH COUNT`; the
//! passphrase comes from `SESAME_PASSPHRASE`. Prints the mean latency.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, table, field, lo, hi, width, count] = args.as_slice() else {
        return Err("usage: table_queries PROFILE_DIR TABLE FIELD LO HI WIDTH COUNT".into());
    };
    let (lo, hi, width, count): (i64, i64, i64, usize) =
        (lo.parse()?, hi.parse()?, width.parse()?, count.parse()?);
    let pass = std::env::var("SESAME_PASSPHRASE")?;
    let profile = sesame_client::Profile::open(dir, &pass)?;
    let mut t = sesame_client::Table::open(&profile, table)?;
    let start = std::time::Instant::now();
    let mut records = 0;
    for i in 0..count {
        let a = lo + (i as i64 * 7919) % (hi - lo - width).max(1);
        let q = format!("{field} between {a} and {}", a + width);
        records += t.query(&q, None)?.records.len();
    }
    let per = start.elapsed().as_secs_f64() * 1e3 / count as f64;
    println!("{count} queries, {records} records, {per:.3} ms per query");
    Ok(())
}
