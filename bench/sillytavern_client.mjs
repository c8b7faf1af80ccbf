// Driven by bench/sillytavern.py: the extension's own sync and API modules (clients/sillytavern/lib) against a real
// Lorekeeper over HTTP, on a long chat, doing per turn what the generate interceptor does. Prints one JSON object.
//
//   node bench/sillytavern_client.mjs <server url> <token> <messages> <turns>

import { Api } from '../clients/sillytavern/lib/api.js';
import { MemoryStore } from '../clients/sillytavern/lib/store.js';
import { ChatSync, withRecall } from '../clients/sillytavern/lib/sync.js';

const [serverUrl, token, messageCount, turnCount] = process.argv.slice(2);
const WORDS = 'the lantern keeper walked along harbour wall while rain fell on old stones and gulls cried over dark water'.split(' ');

/** @param {number} seed */
function sentence(seed, words = 45) {
    return Array.from({ length: words }, (_, i) => WORDS[(seed * 7 + i * 13) % WORDS.length]).join(' ');
}

/** @param {number} i */
function message(i) {
    const user = i % 2 === 1;
    const base = { name: user ? 'User' : 'Mira', is_user: user, is_system: false, send_date: new Date(1700000000000 + i * 60000).toISOString(), mes: sentence(i), extra: {} };
    if (user) return base;
    return { ...base, swipes: [base.mes], swipe_id: 0, swipe_info: [{ send_date: base.send_date, extra: {} }], extra: { api: 'openai', model: 'bench' } };
}

/** @param {number[]} values @param {number} q */
function quantile(values, q) {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

const live = { messages: Array.from({ length: Number(messageCount) }, (_, i) => message(i)), metadata: { integrity: crypto.randomUUID(), note_prompt: '' } };
const host = { snapshot: () => live, replace: async (state) => Object.assign(live, state), busy: () => false };
const api = new Api({ serverUrl, token, timeoutMs: 120000 });
const sync = new ChatSync({ api, store: new MemoryStore(), host, clientKey: `st:char:bench.png:bench-${Date.now()}` });

let started = performance.now();
await sync.bind();
const bindMs = performance.now() - started;

const added = [];
const appendBytes = [];
const editBytes = [];
const planMs = [];
const flushMs = [];
const serverMs = [];
for (let turn = 0; turn < Number(turnCount); turn++) {
    // The pending user message, then what the interceptor does: send it, then build the context.
    const index = live.messages.length;
    live.messages.push({ ...message(index | 1), is_user: true, name: 'User', mes: `Turn ${turn}: ${sentence(turn, 20)}` });
    let before = api.bytesSent;
    started = performance.now();
    await sync.flush();
    flushMs.push(performance.now() - started);
    appendBytes.push(api.bytesSent - before);
    const answer = await api.context(sync.chatId, { message: live.messages[index].mes }, 120000);
    added.push(performance.now() - started);
    serverMs.push(answer.timings_ms?.total ?? 0);
    if (answer.recall?.stored && answer.recall.bme_recall) {
        live.messages[index] = withRecall(live.messages[index], answer.recall.bme_recall);
        sync.acknowledgeRecall(index, answer.recall.bme_recall, answer.integrity);
    }
    // The reply arrives (not timed), then an edit somewhere in the middle of the chat.
    live.messages.push(message(index + 1));
    await sync.flush();
    const target = Math.floor(live.messages.length / 2) + turn;
    live.messages[target] = { ...live.messages[target], mes: `${live.messages[target].mes} (edited ${turn})` };
    before = api.bytesSent;
    const planStarted = performance.now();
    await sync.flush();
    planMs.push(performance.now() - planStarted);
    editBytes.push(api.bytesSent - before);
}

// The first turns load the embedding model in each of the server's workers: left out of the quantiles.
const WARM_UP = 4;
const warm = added.slice(WARM_UP);
console.log(
    JSON.stringify({
        messages: Number(messageCount),
        turns: Number(turnCount),
        bind_ms: bindMs,
        added_ms_p50: quantile(warm, 0.5),
        added_ms_p95: quantile(warm, 0.95),
        added_ms_max: Math.max(...warm),
        samples: warm.length,
        first_turn_ms: added[0],
        warm_up_max_ms: Math.max(...added.slice(0, WARM_UP)),
        warm_up_turns: WARM_UP,
        append_ms_p50: quantile(flushMs.slice(WARM_UP), 0.5),
        context_server_ms_p50: quantile(serverMs.slice(WARM_UP), 0.5),
        context_server_ms_p95: quantile(serverMs.slice(WARM_UP), 0.95),
        append_bytes_median: quantile(appendBytes, 0.5),
        edit_bytes_median: quantile(editBytes, 0.5),
        edit_bytes_max: Math.max(...editBytes),
        edit_sync_ms_p50: quantile(planMs, 0.5),
        conflicts: sync.conflicts,
    }),
);
sync.close();
