#!/usr/bin/env node
// FCFS over hpctwin's JSON-lines scheduler protocol (docs/protocol.md), in Node.js (>= 18),
// with no npm package. Run it through the twin with
//
//     hpctwin run --workload KTH-SP2 --scheduler "exec:node examples/schedulers/fcfs_client.js"
//
// Policy (DESIGN.md section 6): strict first-come first-served; jobs start in queue order while
// they fit and the first job that does not fit blocks every job behind it. Job sizes come from the
// JOB_SUBMITTED events; the queue order and the free units from each message's state snapshot.
"use strict";
const readline = require("readline");

const size = new Map(); // job id -> units

function decide(msg) {
  for (const ev of msg.events) {
    if (ev.type === "JOB_SUBMITTED") size.set(ev.data.job_id, ev.data.job.res);
  }
  const state = msg.state;
  if (!state) return [];
  let free = state.nb_free;
  const out = [];
  for (const id of state.queue) {
    const need = size.get(id);
    if (need > free) break;
    free -= need;
    out.push({ timestamp: msg.now, type: "EXECUTE_JOB", data: { job_id: id } });
  }
  return out;
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.events.some((ev) => ev.type === "SIMULATION_ENDS")) {
    rl.close();
    return;
  }
  process.stdout.write(JSON.stringify({ now: msg.now, events: decide(msg) }) + "\n");
});
