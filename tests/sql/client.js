// node-postgres (npm `pg`, COPY through `pg-copy-streams`) runs the steps of
// a scenario written by test_clients.py and prints every answer as JSON:
// rows (as arrays), a row count, or the error's SQLSTATE.
//
//   node client.js SPEC.json      (NODE_PATH: the folder holding pg)
"use strict";
const fs = require("fs");
const { Readable } = require("stream");
const { pipeline } = require("stream/promises");
const { Client, types } = require("pg");
const { from: copyFrom } = require("pg-copy-streams");

// int8 and numeric as numbers (their texts otherwise); timestamptz stays a
// Date, written as ISO 8601 by JSON.stringify.
types.setTypeParser(20, (v) => Number(v));
types.setTypeParser(1700, (v) => Number(v));

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const client = new Client(spec.conn);
  await client.connect();
  const out = [];
  const names = new Map();
  for (const s of spec.steps) {
    try {
      if (s.kind === "copy") {
        const stream = client.query(copyFrom(s.sql));
        await pipeline(Readable.from([s.data]), stream);
        out.push({ rowcount: stream.rowCount });
        continue;
      }
      const q = { text: s.sql, values: s.params, rowMode: "array" };
      if (s.prepare) {
        // A named query: node-postgres prepares it once (Parse) and binds
        // it at each use.
        if (!names.has(s.sql)) names.set(s.sql, `q${names.size}`);
        q.name = names.get(s.sql);
      }
      const r = await client.query(q);
      out.push(s.kind === "query" ? { rows: r.rows } : { rowcount: r.rowCount });
    } catch (e) {
      if (!e.code) throw e;
      out.push({ error: e.code, message: e.message });
    }
  }
  await client.end();
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
