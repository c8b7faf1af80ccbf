// ChatSync (lib/sync.js) end to end against the fake Lorekeeper: Api (lib/api.js) with the fake's fetch, a
// MemoryStore, and a fake SillyTavern holding the live chat. Timers are not waited for: the tests call flush().

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Api, LorekeeperError } from '../lib/api.js';
import { jsonEqual, toJson } from '../lib/json.js';
import { MemoryStore } from '../lib/store.js';
import { PAGE, pageKey } from '../lib/saved.js';
import { ChatSync, MergeDeferred, withRecall } from '../lib/sync.js';
import { FakeLorekeeper } from './fake_server.mjs';
import { ALL_MUTATIONS, APPEND_MUTATIONS, ChatGen, Rand, copy, markerCounts, markerOf, mutate } from './helpers.mjs';

/** SillyTavern as ChatSync sees it: the live chat, and `replace` for a merge. */
class FakeHost {
    /** @param {{messages: any[], metadata: Record<string, any>}} state */
    constructor(state) {
        this.live = copy(state);
        this.replaced = 0;
    }

    snapshot() {
        return this.live;
    }

    /** @param {{messages: any[], metadata: Record<string, any>}} state */
    async replace(state) {
        this.live = copy(state);
        this.replaced++;
    }
}

/** Every ChatSync a test made, closed when it ends (no timer outlives a test). */
const opened = [];

/**
 * One device: its own Api, store (or a shared one) and live chat.
 * @param {FakeLorekeeper} fake
 * @param {{state?: any, host?: FakeHost, store?: MemoryStore, clientKey?: string, bind?: boolean}} options
 */
async function device(fake, { state, host, store = new MemoryStore(), clientKey = 'chat-1', bind = true }) {
    const api = new Api({ serverUrl: 'http://lk.test', token: 't', fetch: fake.fetch });
    host ??= new FakeHost(state);
    /** @type {string[]} */
    const statuses = [];
    const sync = new ChatSync({ api, store, host, clientKey, title: 'Test chat', onStatus: (s) => statuses.push(s.state) });
    opened.push(sync);
    if (bind) await sync.bind();
    return { api, store, host, sync, statuses };
}

/** Run a test and close every ChatSync it opened. */
function syncTest(name, fn) {
    test(name, async (t) => {
        try {
            await fn(t);
        } finally {
            for (const sync of opened.splice(0)) sync.close();
        }
    });
}

const gen = (seed = 1, prefix = 'm') => new ChatGen(new Rand(seed), prefix);
const writesIn = (fake) => fake.log.filter((r) => r.method !== 'GET');
const onlyChat = (fake) => {
    assert.equal(fake.chats.size, 1);
    return [...fake.chats.values()][0];
};

describe('ChatSync', () => {
    syncTest('bind imports once: a second device, with the same store or a fresh one, finds the same chat', async () => {
        const fake = new FakeLorekeeper();
        const state = gen().chat(20);
        const a = await device(fake, { state });
        assert.equal(fake.requests('POST', 'chats/import').length, 1);
        const chat = onlyChat(fake);
        assert.equal(a.sync.chatId, chat.id);
        assert.equal(a.sync.integrity, chat.integrity);
        assert.ok(jsonEqual(fake.state(chat.id), state));
        assert.ok(jsonEqual(a.sync.base, state));
        assert.equal((await a.store.get('chat-1')).chatId, chat.id);

        const sameStore = await device(fake, { state, store: a.store });
        const fresh = await device(fake, { state });
        for (const other of [sameStore, fresh]) {
            assert.equal(other.sync.chatId, chat.id);
            await other.sync.flush();
        }
        assert.equal(fake.requests('POST', 'chats/import').length, 1, 'no second import');
        assert.equal(fake.chats.size, 1);
        assert.equal(writesIn(fake).length, 1, 'nothing to write');
        assert.ok(jsonEqual(fake.state(chat.id), state));
    });

    syncTest('an append sends only the new message', async (t) => {
        const fake = new FakeLorekeeper();
        const g = gen(2);
        const a = await device(fake, { state: g.chat(50) });
        const message = g.user(180);
        const size = Buffer.byteLength(JSON.stringify(message));
        a.host.live.messages.push(message);
        await a.sync.flush();
        const id = a.sync.chatId;
        const sent = fake.bytesByPath[`chats/${id}/append`];
        t.diagnostic(`append of a ${size}-byte message: ${sent} bytes sent`);
        assert.ok(size >= 290 && size <= 330, `message of ${size} bytes`);
        assert.ok(sent < 1024, `${sent} bytes`);
        assert.equal(fake.requests('POST', `chats/${id}/append`).length, 1);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
        assert.ok(jsonEqual(a.sync.base, a.host.live));
        assert.equal(a.sync.integrity, fake.integrity(id));
        assert.equal(a.sync.status.state, 'synced');
        const record = await a.store.get('chat-1');
        assert.equal(record.integrity, fake.integrity(id));
        assert.deepEqual(record.queue, []);
    });

    syncTest('an edit in a 5,000-message chat sends under 2 KB', async (t) => {
        const fake = new FakeLorekeeper();
        const a = await device(fake, { state: gen(3).chat(5000) });
        const id = a.sync.chatId;
        const imported = fake.bytesByPath['chats/import'];
        fake.resetCounters();
        const started = performance.now();
        a.host.live.messages[2500].mes += ' (edited)';
        a.host.live.messages[2500].extra.display_text = 'edited';
        await a.sync.flush();
        const ms = performance.now() - started;
        const sent = fake.bytesTotal;
        t.diagnostic(`chat imported in ${imported} bytes; the edit sent ${sent} bytes in ${ms.toFixed(0)} ms`);
        assert.ok(sent < 2048, `${sent} bytes`);
        assert.deepEqual(
            fake.log.map((r) => `${r.method} ${r.path}`),
            [`POST chats/${id}/patch`],
        );
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('a redirected write stops the sync with why, sends nothing more and keeps the queue', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(5);
        const a = await device(fake, { state: g.chat(10) });
        const id = a.sync.chatId;
        const passed = fake.fetch;
        /** @type {string[]} */
        const redirected = [];
        // The address now answers writes with a redirect, as a proxy sending http:// to https:// does.
        a.api.fetch = async (url, init = {}) => {
            if ((init.method ?? 'GET') === 'GET') return passed(url, init);
            redirected.push(`${init.method} ${url}`);
            return new Response(null, { status: 301, headers: { Location: 'https://lk.test/' } });
        };
        fake.resetCounters();
        const message = g.user();
        a.host.live.messages.push(copy(message));
        await assert.rejects(a.sync.flush(), (e) => e instanceof LorekeeperError && e.redirected && !e.offline);
        assert.deepEqual(redirected, [`POST http://lk.test/api/v1/chats/${id}/append?mirror=true`], 'the whole chat was not sent again');
        assert.equal(a.sync.status.state, 'error');
        assert.match(a.sync.status.message, /answered with a redirect to https:\/\/lk\.test\/.*Sync is stopped until the address is changed/);
        assert.ok(a.sync.failed);
        const record = await a.store.get('chat-1');
        assert.deepEqual(record.queue.map((item) => item.write), [{ kind: 'append', messages: [message] }]);
        assert.equal(fake.state(id).messages.length, 10);
    });

    syncTest('offline: changes wait in the stored queue, then go out in order', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(4);
        const a = await device(fake, { state: g.chat(10) });
        const id = a.sync.chatId;
        fake.resetCounters();
        fake.offline = true;
        const first = g.user();
        a.host.live.messages.push(copy(first));
        await assert.rejects(a.sync.flush(), (e) => e instanceof LorekeeperError && e.offline);
        assert.equal(a.sync.status.state, 'offline');
        assert.equal(a.statuses.at(-1), 'offline');
        let record = await a.store.get('chat-1');
        assert.equal(record.queue.length, 1);
        assert.deepEqual(record.queue[0].write, { kind: 'append', messages: [first] });
        const key = record.queue[0].key;

        // More changes while still offline: an edit of the queued message, a reply, a hide, metadata.
        a.host.live.messages[10].mes += ' (typo fixed)';
        a.host.live.messages.push(g.assistant());
        a.host.live.messages[2].is_system = true;
        a.host.live.metadata.note_prompt = 'remember the lantern';
        await assert.rejects(a.sync.flush(), (e) => e instanceof LorekeeperError && e.offline);
        record = await a.store.get('chat-1');
        assert.equal(record.queue[0].key, key, 'the queued write keeps its Idempotency-Key');
        assert.equal(fake.state(id).messages.length, 10, 'nothing reached the server');

        fake.offline = false;
        await a.sync.flush();
        assert.equal(a.sync.status.state, 'synced');
        const sent = fake.log.filter((r) => r.status !== null && r.method !== 'GET' && r.status < 300);
        // The queued append first (with its key), then what changed after it.
        assert.equal(sent[0].path, `chats/${id}/append`);
        assert.deepEqual(JSON.parse(sent[0].body).messages, [first]);
        assert.ok(sent.length >= 2);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
        assert.ok(jsonEqual(a.sync.base, a.host.live));
        assert.deepEqual((await a.store.get('chat-1')).queue, []);
    });

    syncTest('a write whose answer was lost is sent again with its key and applied once', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(5);
        const a = await device(fake, { state: g.chat(10) });
        const id = a.sync.chatId;
        a.host.live.messages[3].mes = 'edited once';
        a.host.live.messages.push(g.user());
        fake.loseAnswers = 1;
        await assert.rejects(a.sync.flush(), (e) => e instanceof LorekeeperError && e.offline);
        assert.equal(fake.state(id).messages[3].mes, 'edited once', 'the write landed');
        await a.sync.flush();
        assert.equal(fake.log.filter((r) => r.replayed).length, 1, 'the retry was answered from the Idempotency-Key');
        assert.ok(jsonEqual(fake.state(id), a.host.live));
        assert.equal(a.sync.integrity, fake.integrity(id));
    });

    syncTest('a write whose answer was lost, then a reload: nothing doubled', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(6);
        const store = new MemoryStore();
        const a = await device(fake, { state: g.chat(10), store });
        const id = a.sync.chatId;
        a.host.live.messages.push(g.user());
        fake.loseAnswers = 1;
        await assert.rejects(a.sync.flush(), (e) => e instanceof LorekeeperError && e.offline);
        assert.equal(fake.state(id).messages.length, 11, 'the append landed, its answer was lost');
        a.sync.close();
        // The tab is reloaded before the retry.
        const again = await device(fake, { host: a.host, store });
        await again.sync.flush();
        assert.equal(fake.state(id).messages.length, 11);
        assert.equal(again.host.live.messages.length, 11);
        assert.ok(jsonEqual(fake.state(id), again.host.live));
    });

    syncTest('conflict: both devices append, the second to send merges, and nothing is lost', async () => {
        const fake = new FakeLorekeeper();
        const state = gen(7).chat(12);
        const a = await device(fake, { state });
        const b = await device(fake, { state });
        const id = a.sync.chatId;
        const fromB = gen(70, 'B').user();
        const fromA = gen(71, 'A').user();
        b.host.live.messages.push(fromB);
        await b.sync.flush();
        a.host.live.messages.push(fromA);
        await a.sync.flush();
        assert.equal(
            fake.log.filter((r) => r.status === 409 && r.path === `chats/${id}/append`).length,
            1,
            "A's first append met a 409",
        );
        assert.equal(a.sync.conflicts, 1);
        assert.equal(a.host.replaced, 1, "B's message went into A's chat");
        assert.deepEqual(a.host.live.messages.slice(-2), [fromB, fromA]);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
        assert.equal(fake.state(id).messages.length, 14);
        assert.equal(fake.chat(id).revisions.length, 0, 'a clean merge needs no overwrite');
        // B learns A's message on its next sync.
        b.host.live.metadata.note_prompt = 'B again';
        await b.sync.flush();
        assert.ok(jsonEqual(b.host.live, fake.state(id)));
        assert.deepEqual(b.host.live.messages.slice(-2), [fromB, fromA]);
    });

    syncTest('conflict: both edit the same message; the local edit wins and the server keeps a revision', async () => {
        const fake = new FakeLorekeeper();
        const state = gen(8).chat(12);
        const a = await device(fake, { state });
        const b = await device(fake, { state });
        const id = a.sync.chatId;
        b.host.live.messages[5].mes = 'B says so';
        await b.sync.flush();
        const fromB = fake.state(id);
        a.host.live.messages[5].mes = 'A says so';
        await a.sync.flush();
        assert.equal(fake.state(id).messages[5].mes, 'A says so');
        assert.ok(jsonEqual(fake.state(id), a.host.live));
        const revisions = fake.chat(id).revisions;
        assert.equal(revisions.length, 1);
        assert.equal(revisions[0].reason, 'import over the chat');
        assert.ok(jsonEqual({ messages: revisions[0].messages, metadata: revisions[0].metadata }, fromB), "B's version is kept");
        assert.equal(fake.chats.size, 1);
        assert.equal(a.sync.integrity, fake.integrity(id));
        // B, with nothing of its own left to send, takes A's version on its next sync.
        b.host.live.messages.push(gen(80, 'B').user());
        await b.sync.flush();
        assert.equal(b.host.live.messages[5].mes, 'A says so');
        assert.ok(jsonEqual(b.host.live, fake.state(id)));
    });

    syncTest("acknowledgeRecall keeps base equal to the server after it writes extra.bme_recall", async () => {
        const fake = new FakeLorekeeper();
        const a = await device(fake, { state: gen(9).chat(12) });
        const id = a.sync.chatId;
        const record = { injection_text: 'You remember the lantern.', memory_ids: [1, 2] };
        // Lorekeeper's context build writes the recall into the user message itself.
        const integrity = fake.writeAsOtherDevice(id, (state) => {
            state.messages[10] = withRecall(state.messages[10], record);
        });
        a.sync.acknowledgeRecall(10, record, integrity);
        assert.equal(a.sync.integrity, integrity);
        assert.ok(jsonEqual(a.sync.base, fake.state(id)));
        await new Promise((resolve) => setImmediate(resolve)); // the store write is not awaited
        assert.equal((await a.store.get('chat-1')).integrity, integrity);
        // SillyTavern's copy gets the same record: nothing to send, nothing to read.
        a.host.live.messages[10] = withRecall(a.host.live.messages[10], record);
        fake.resetCounters();
        await a.sync.flush();
        assert.deepEqual(fake.log, []);
        // The next edit goes through with that integrity, no 409.
        a.host.live.messages[3].mes = 'edited';
        await a.sync.flush();
        assert.ok(fake.log.every((r) => r.status < 300), JSON.stringify(fake.log.map((r) => r.status)));
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('acknowledgeRecall with writes still queued: the chat is read back before the next write', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(10);
        const a = await device(fake, { state: g.chat(12) });
        const id = a.sync.chatId;
        fake.offline = true;
        a.host.live.messages.push(g.user());
        await assert.rejects(a.sync.flush());
        fake.offline = false;
        const record = { injection_text: 'recalled' };
        const integrity = fake.writeAsOtherDevice(id, (state) => {
            state.messages[11] = withRecall(state.messages[11], record);
        });
        a.sync.acknowledgeRecall(11, record, integrity);
        assert.equal(a.sync.stale, true);
        await a.sync.flush();
        assert.equal(a.host.live.messages[11].extra.bme_recall.injection_text, 'recalled');
        assert.equal(a.host.live.messages.length, 13);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('a reload with nothing changed reads no chat and writes nothing', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(11);
        const store = new MemoryStore();
        const a = await device(fake, { state: g.chat(300), store });
        a.host.live.messages.push(g.user());
        await a.sync.flush();
        a.sync.close();
        fake.resetCounters();
        const again = await device(fake, { host: new FakeHost(a.host.live), store });
        await again.sync.flush();
        assert.deepEqual(
            fake.log.map((r) => `${r.method} ${r.path}`),
            ['GET chats/'],
            'one look-up by client key; no delta, no write',
        );
        assert.equal(again.sync.integrity, fake.integrity(again.sync.chatId));
        assert.equal(again.host.replaced, 0);
    });

    syncTest('a reload after another device wrote: the chat is read back and merged', async () => {
        const fake = new FakeLorekeeper();
        const g = gen(12);
        const store = new MemoryStore();
        const state = g.chat(20);
        const a = await device(fake, { state, store });
        const id = a.sync.chatId;
        a.sync.close();
        const b = await device(fake, { state });
        const fromB = gen(120, 'B').assistant();
        b.host.live.messages.push(fromB);
        await b.sync.flush();
        // A was closed with a change of its own not yet sent.
        a.host.live.messages[1].mes = 'edited on A';
        const again = await device(fake, { host: a.host, store });
        await again.sync.flush();
        assert.deepEqual(again.host.live.messages.at(-1), fromB);
        assert.equal(again.host.live.messages[1].mes, 'edited on A');
        assert.ok(jsonEqual(fake.state(id), again.host.live));
    });

    syncTest('a device that writes before every write of this one is not raced for ever: the sync backs off', async () => {
        const fake = new FakeLorekeeper();
        const a = await device(fake, { state: gen(15).chat(6) });
        const id = a.sync.chatId;
        let racing = true;
        const forward = a.api.fetch;
        a.api.fetch = async (url, init = {}) => {
            if (racing && init.method && init.method !== 'GET') {
                fake.writeAsOtherDevice(id, (state) => {
                    state.metadata.note_prompt = `B ${fake.log.length}`;
                });
            }
            return forward(url, init);
        };
        a.host.live.messages.push(gen(150, 'A').user());
        const before = fake.log.length;
        await a.sync.flush();
        const asked = fake.log.length - before;
        assert.equal(a.sync.status.state, 'conflict', 'not "Synced": the message is not in Lorekeeper yet');
        assert.ok(a.sync.notBefore > Date.now(), 'the next try waits');
        assert.ok(asked <= 2 * 50 + 2, `one sync asks at most two requests a round (${asked})`);
        const waited = a.sync.notBefore - Date.now();
        await a.sync.flush();
        assert.ok(a.sync.notBefore - Date.now() > waited, 'and waits longer after another such sync');
        racing = false;
        a.sync.notBefore = 0;
        await a.sync.flush();
        assert.equal(a.sync.status.state, 'synced');
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('a merge waits while SillyTavern cannot take a new chat (host.canReplace), then goes in', async () => {
        const fake = new FakeLorekeeper();
        const state = gen(14).chat(8);
        const a = await device(fake, { state });
        const b = await device(fake, { state });
        const id = a.sync.chatId;
        b.host.live.messages.push(gen(140, 'B').user());
        await b.sync.flush();
        let replaceable = false;
        a.host.canReplace = () => replaceable;
        a.host.live.messages.push(gen(141, 'A').user());
        await assert.rejects(a.sync.flush(), (e) => e instanceof MergeDeferred);
        assert.equal(a.sync.status.state, 'conflict');
        assert.equal(a.host.replaced, 0);
        assert.equal(fake.state(id).messages.length, 9, 'nothing of A written before the merge');
        replaceable = true;
        await a.sync.flush();
        assert.equal(a.host.replaced, 1);
        assert.equal(a.host.live.messages.length, 10);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('close() leaves no timer behind after an offline retry was scheduled', async () => {
        const fake = new FakeLorekeeper();
        const a = await device(fake, { state: gen(13).chat(3) });
        fake.offline = true;
        a.host.live.messages.push(gen(130).user());
        await assert.rejects(a.sync.flush());
        assert.notEqual(a.sync.timer, null, 'a retry is scheduled');
        const timers = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
        const before = timers();
        a.sync.close();
        assert.equal(timers(), before - 1, 'close() cleared the retry');
        a.sync.schedule(10);
        assert.equal(timers(), before - 1, 'nothing is scheduled once closed');
    });
});

/**
 * A device synced with a chat of `messages` messages, and the Lorekeeper backup taken of it then.
 * @param {number} seed
 * @param {number} messages
 */
async function backedUp(seed, messages) {
    const fake = new FakeLorekeeper();
    const g = gen(seed);
    const a = await device(fake, { state: g.chat(messages) });
    const id = a.sync.chatId;
    return { fake, g, a, id, backup: fake.backup(id) };
}

describe('ChatSync and a Lorekeeper restored from an older backup', () => {
    syncTest('its chat went back in time: this chat is sent over it, and nothing is removed here', async () => {
        const { fake, g, a, id, backup } = await backedUp(40, 10);
        for (let n = 0; n < 3; n++) {
            a.host.live.messages.push(g.user(), g.assistant());
            await a.sync.flush();
        }
        a.host.live.metadata.note = 'written after the backup';
        await a.sync.flush();
        const written = copy(a.host.live);
        assert.equal(written.messages.length, 16);

        fake.restore(backup); // the server's database, as the backup held it
        a.host.live.messages.push(g.user());
        await a.sync.flush();

        assert.equal(a.sync.restores, 1);
        assert.equal(a.host.live.messages.length, 17, 'no message removed from SillyTavern');
        assert.ok(jsonEqual(a.host.live.messages.slice(0, 16), written.messages));
        assert.equal(a.host.live.metadata.note, 'written after the backup');
        assert.ok(jsonEqual(fake.state(id), a.host.live), 'Lorekeeper holds the chat again');
        assert.equal(fake.chat(id).revisions.at(-1).messages.length, 10, 'the restored copy is kept as a revision');
        assert.equal(a.sync.status.state, 'synced');
        assert.equal(a.sync.writes, fake.chat(id).writes);

        // Then the sync goes on as before: another device's deletion is merged here.
        fake.writeAsOtherDevice(id, (state) => {
            state.messages.splice(15, 2);
        });
        a.sync.stale = true;
        await a.sync.flush();
        assert.equal(a.sync.restores, 1);
        assert.equal(a.host.live.messages.length, 15);
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('found when the browser opens the chat again after the restore', async () => {
        const { fake, g, a, id, backup } = await backedUp(41, 6);
        a.host.live.messages.push(g.user(), g.assistant());
        await a.sync.flush();
        a.sync.close();
        fake.restore(backup);

        const again = await device(fake, { store: a.store, host: a.host });
        await again.sync.flush();
        assert.equal(again.sync.restores, 1);
        assert.equal(a.host.live.messages.length, 8, 'no message removed from SillyTavern');
        assert.ok(jsonEqual(fake.state(id), a.host.live));
    });

    syncTest('a write landing between the read and the chat sent over it is not replaced unseen', async () => {
        const { fake, g, a, id, backup } = await backedUp(43, 6);
        a.host.live.messages.push(g.user(), g.assistant());
        await a.sync.flush();
        fake.restore(backup);
        const importChat = fake.importChat.bind(fake);
        let raced = false;
        fake.importChat = (query, headers, bodyText) => {
            if (!raced) {
                raced = true; // another device writes just before this one's chat arrives
                fake.writeAsOtherDevice(id, (state) => {
                    state.metadata.other = 'written in the race';
                });
            }
            return importChat(query, headers, bodyText);
        };
        a.host.live.messages.push(g.user());
        await assert.rejects(a.sync.flush(), (error) => error instanceof LorekeeperError && error.isConflict);
        assert.equal(fake.chat(id).metadata.other, 'written in the race', 'the 409 replaced nothing');
        assert.equal(a.sync.stale, true, 'read back at the next sync');
        await a.sync.flush();
        assert.equal(a.sync.restores, 1);
        assert.equal(a.host.live.messages.length, 9, 'no message removed from SillyTavern');
        assert.ok(jsonEqual(fake.state(id).messages, a.host.live.messages));
    });

    syncTest("another device's deletions are still deletions: the count grew", async () => {
        const fake = new FakeLorekeeper();
        const a = await device(fake, { state: gen(42).chat(8) });
        const id = a.sync.chatId;
        fake.writeAsOtherDevice(id, (state) => {
            state.messages.splice(4, 4);
        });
        a.sync.stale = true;
        await a.sync.flush();
        assert.equal(a.sync.restores, 0);
        assert.equal(a.host.live.messages.length, 4);
    });
});

describe('ChatSync property', () => {
    const ONLY_SEED = process.env.LK_SEED === undefined ? null : Number(process.env.LK_SEED);
    const COUNT = Math.max(20, Math.floor((Number(process.env.LK_SCENARIOS) || 300) / 5));
    const seeds = ONLY_SEED !== null ? [ONLY_SEED] : Array.from({ length: COUNT }, (_, i) => 0xd1ce + i * 104729);

    syncTest(`${seeds.length} random two-device sessions converge, and appends survive clean merges`, async () => {
        for (const seed of seeds) {
            const rand = new Rand(seed);
            const fake = new FakeLorekeeper();
            const state = new ChatGen(rand, 'S').chat(rand.int(15));
            const a = await device(fake, { state });
            const b = await device(fake, { state });
            const gens = { A: new ChatGen(rand, 'A'), B: new ChatGen(rand, 'B') };
            const appendOnly = rand.chance(0.35);
            const kinds = appendOnly ? APPEND_MUTATIONS : ALL_MUTATIONS;
            const steps = [];
            try {
                for (let round = 0; round < 4; round++) {
                    for (const [name, d] of [
                        ['A', a],
                        ['B', b],
                    ]) {
                        if (rand.chance(0.7)) {
                            const { state: next, done } = mutate(d.host.live, rand, gens[name], { kinds, max: 4 });
                            d.host.live = next;
                            steps.push(`${name}: ${done.join(', ')}`);
                        }
                        if (rand.chance(0.6)) {
                            await d.sync.flush();
                            steps.push(`${name}: flush`);
                        }
                    }
                }
                // Both send what is left, then each reads the other's changes (a pull: `stale` then flush).
                await a.sync.flush();
                await b.sync.flush();
                for (const d of [a, b]) {
                    d.sync.stale = true;
                    await d.sync.flush();
                }
                const server = fake.state(a.sync.chatId);
                assert.ok(jsonEqual(server, toJson(a.host.live)), "A's chat is the server's");
                assert.ok(jsonEqual(server, toJson(b.host.live)), "B's chat is the server's");
                assert.ok(jsonEqual(a.sync.base, server) && jsonEqual(b.sync.base, server), 'both bases are the server');
                assert.equal(fake.chats.size, 1);
                if (appendOnly) {
                    // Only appends on both devices: every message either wrote is on the server once, each device's in
                    // its own order, and no merge needed an overwrite.
                    assert.equal(fake.chat(a.sync.chatId).revisions.length, 0, 'no overwrite');
                    const counts = markerCounts(server.messages);
                    const order = server.messages.map((m) => markerOf(m));
                    for (const [name, g] of Object.entries(gens)) {
                        const mine = Array.from({ length: g.count }, (_, i) => `${name}${i + 1}`);
                        for (const marker of mine) assert.equal(counts.get(marker), 1, `«${marker}» once on the server`);
                        assert.deepEqual(order.filter((m) => m?.startsWith(name)), mine, `${name}'s messages in order`);
                    }
                }
            } catch (error) {
                console.error(`ChatSync property failed: seed ${seed} (replay: LK_SEED=${seed})\n${steps.join('\n')}`);
                error.message = `seed ${seed}: ${error.message}`;
                throw error;
            } finally {
                a.sync.close();
                b.sync.close();
            }
        }
    });
});

describe('ChatSync and a chat switch', () => {
    syncTest('a sync whose chat is no longer open neither reads nor writes SillyTavern or Lorekeeper', async () => {
        const fake = new FakeLorekeeper();
        const chat = gen(11).chat(6);
        const { sync, host } = await device(fake, { state: chat });
        const before = toJson(onlyChat(fake));
        // Another chat is opened: SillyTavern's array now holds it (or nothing, while it loads).
        let open = true;
        host.owns = () => open;
        open = false;
        host.live = { messages: [], metadata: {} };
        const writes = writesIn(fake).length;
        await sync.flush();
        sync.stale = true; // even a merge that was due
        await sync.flush();
        assert.equal(writesIn(fake).length, writes);
        assert.deepEqual(toJson(onlyChat(fake)), before);
        assert.equal(host.replaced, 0);
    });

    syncTest('a chat array emptied while it loads is not taken for a chat whose messages were all deleted', async () => {
        const fake = new FakeLorekeeper();
        const { sync, host } = await device(fake, { state: gen(12).chat(4) });
        const before = toJson(onlyChat(fake));
        host.live = { messages: [], metadata: host.live.metadata };
        await sync.flush();
        assert.deepEqual(toJson(onlyChat(fake)), before);
    });
});

/** A MemoryStore that counts the bytes each save writes. */
class CountingStore extends MemoryStore {
    constructor() {
        super();
        this.written = 0;
    }

    async write(puts, deletes) {
        this.written += puts.reduce((sum, [, value]) => sum + JSON.stringify(value).length, 0);
        await super.write(puts, deletes);
    }
}

/** A chat of `count` messages synced on a device whose store the test reads. */
async function savedChat(seed, count, store = new MemoryStore()) {
    const fake = new FakeLorekeeper();
    const g = gen(seed);
    const a = await device(fake, { state: g.chat(count), store });
    return { fake, store, g, a };
}

/** The chat opened again from the store, as after a reload, and synced: the fake's log holds only that. */
async function reopened(fake, a, store) {
    a.sync.close();
    fake.resetCounters();
    const again = await device(fake, { host: new FakeHost(a.host.live), store });
    await again.sync.flush();
    return again;
}

describe('ChatSync and its saved state (lib/saved.js)', () => {
    syncTest('sending a message in a 5,000-message chat saves one page of it, not the whole chat', async (t) => {
        const { fake, store, g, a } = await savedChat(21, 5000, new CountingStore());
        store.written = 0;
        a.host.live.messages.push(g.user());
        await a.sync.flush();
        const whole = JSON.stringify(a.sync.base).length;
        t.diagnostic(`the chat is ${whole} bytes as JSON; the send saved ${store.written}`);
        assert.ok(store.written < whole / 10, `${store.written} bytes saved of ${whole}`);
        assert.ok(jsonEqual(fake.state(a.sync.chatId), a.host.live));
    });

    syncTest('looking at a chat that did not change saves nothing and sends nothing', async () => {
        const { fake, store, a } = await savedChat(23, 300, new CountingStore());
        store.written = 0;
        fake.resetCounters();
        for (let n = 0; n < 3; n++) await a.sync.flush(); // the poll, every few seconds
        assert.equal(store.written, 0);
        assert.deepEqual(writesIn(fake), []);
    });

    syncTest('a reload reads the synced chat back from its pages, with edits in several of them', async () => {
        const { fake, store, g, a } = await savedChat(22, 700);
        for (const index of [3, 260, 690]) {
            a.host.live.messages[index].mes += ' (edited)';
            await a.sync.flush();
        }
        a.host.live.messages.push(g.user());
        await a.sync.flush();
        const again = await reopened(fake, a, store);
        assert.deepEqual(fake.log.map((r) => `${r.method} ${r.path}`), ['GET chats/'], 'trusted: nothing read back');
        assert.ok(jsonEqual(again.sync.base, fake.state(again.sync.chatId)));
        assert.equal((await store.get('chat-1')).pages.length, Math.ceil(701 / PAGE));
    });

    syncTest('a record saved whole by an earlier version is read, then saved again in pages', async () => {
        const { fake, store, g, a } = await savedChat(23, 600);
        store.map.clear();
        await store.write([['chat-1', { chatId: a.sync.chatId, integrity: a.sync.integrity, base: a.sync.base, queue: [] }]], []);
        const again = await reopened(fake, a, store);
        assert.deepEqual(fake.log.map((r) => `${r.method} ${r.path}`), ['GET chats/']);
        again.host.live.messages.push(g.user());
        await again.sync.flush();
        const head = await store.get('chat-1');
        assert.equal(head.base, undefined);
        assert.equal(head.pages.length, 3);
        assert.ok(jsonEqual(fake.state(again.sync.chatId), again.host.live));
    });

    syncTest('a page without its head\'s stamp (a save cut short) is not trusted: the chat is read back', async () => {
        const { fake, store, a } = await savedChat(24, 600);
        const id = a.sync.chatId;
        const page = await store.get(pageKey('chat-1', 1));
        await store.write([[pageKey('chat-1', 1), { ...page, stamp: 'another save', messages: page.messages.slice(1) }]], []);
        const again = await reopened(fake, a, store);
        assert.ok(fake.requests('GET', `chats/${id}/delta`).length > 0, 'the chat is read back');
        assert.ok(jsonEqual(again.sync.base, fake.state(id)));
        assert.ok(jsonEqual(fake.state(id), again.host.live));
    });

    syncTest('a chat that shrank drops its last pages; a chat gone from Lorekeeper leaves none', async () => {
        const { store, a } = await savedChat(25, 600);
        a.host.live.messages.splice(200);
        await a.sync.flush();
        assert.equal((await store.get('chat-1')).pages.length, 1);
        assert.equal(await store.get(pageKey('chat-1', 1)), undefined);
        assert.equal(await store.get(pageKey('chat-1', 2)), undefined);
        await a.sync.saved.forget();
        assert.deepEqual([...store.map.keys()], []);
    });
});
