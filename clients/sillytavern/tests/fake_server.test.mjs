// The fake Lorekeeper itself (tests/fake_server.mjs) behaves as the server does where the sync depends on it, and
// lib/api.js speaks to it as to the real one.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Api, LorekeeperError } from '../lib/api.js';
import { toJsonl } from '../lib/sync.js';
import { FakeLorekeeper } from './fake_server.mjs';
import { ChatGen, Rand, copy } from './helpers.mjs';

const URL_BASE = 'http://lk.test/api/v1/';

async function setup(count = 5) {
    const fake = new FakeLorekeeper();
    const api = new Api({ serverUrl: 'http://lk.test', token: 't', fetch: fake.fetch });
    const state = new ChatGen(new Rand(count)).chat(count);
    const chat = await api.importChat({ jsonl: toJsonl(state), clientKey: 'k', title: 'T' });
    return { fake, api, state, chat };
}

/** A raw request to the fake. */
async function call(fake, method, path, { body, integrity, key, contentType = 'application/json' } = {}) {
    const headers = { Authorization: 'Bearer t', 'Content-Type': contentType };
    if (integrity) headers['If-Match'] = `"${integrity}"`;
    if (key) headers['Idempotency-Key'] = key;
    const response = await fake.fetch(URL_BASE + path, {
        method,
        headers,
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null, etag: response.headers.get('etag') };
}

describe('fake Lorekeeper', () => {
    test('import creates once per client key, then updates keeping a revision', async () => {
        const { fake, api, state, chat } = await setup();
        assert.equal(chat.created, true);
        assert.deepEqual(fake.state(chat.id), state);
        const found = await api.findChat('k');
        assert.equal(found.id, chat.id);
        assert.equal(found.integrity, chat.integrity);
        assert.equal(await api.findChat('other'), null);
        const changed = copy(state);
        changed.messages.pop();
        const again = await api.importChat({ jsonl: toJsonl(changed), clientKey: 'k' });
        assert.equal(again.id, chat.id);
        assert.equal(again.created, false);
        assert.notEqual(again.integrity, chat.integrity);
        assert.equal(fake.chat(chat.id).revisions.length, 1);
        assert.deepEqual(fake.chat(chat.id).revisions[0].messages, state.messages);
        await assert.rejects(
            api.importChat({ jsonl: toJsonl(state), clientKey: 'k', chatId: chat.id, ifMatch: chat.integrity }),
            (e) => e instanceof LorekeeperError && e.status === 409 && e.body.error === 'integrity',
        );
    });

    test('writes need the current integrity: 428 without, 409 {error: "integrity"} when stale', async () => {
        const { fake, chat } = await setup();
        const message = { name: 'U', is_user: true, mes: 'hi' };
        assert.equal((await call(fake, 'POST', `chats/${chat.id}/append`, { body: { messages: [message] } })).status, 428);
        const stale = await call(fake, 'POST', `chats/${chat.id}/append`, { body: { messages: [message] }, integrity: 'nope' });
        assert.equal(stale.status, 409);
        assert.equal(stale.body.error, 'integrity');
        const ok = await call(fake, 'POST', `chats/${chat.id}/append`, { body: { messages: [message] }, integrity: chat.integrity });
        assert.equal(ok.status, 200);
        assert.equal(ok.body.appended, 1);
        assert.equal(ok.etag, `"${ok.body.integrity}"`);
        assert.notEqual(ok.body.integrity, chat.integrity);
    });

    test("append: messages equal to the last stored one are dropped while they are; a lost answer's retry succeeds", async () => {
        const { fake, chat, state } = await setup();
        const last = state.messages.at(-1);
        const fresh = { name: 'U', is_user: true, mes: 'new' };
        const answer = await call(fake, 'POST', `chats/${chat.id}/append`, {
            body: { messages: [last, last, fresh, fresh] },
            integrity: chat.integrity,
        });
        assert.deepEqual([answer.body.appended, answer.body.skipped], [2, 2]);
        assert.deepEqual(fake.state(chat.id).messages.slice(-2), [fresh, fresh]);
        // Nothing new: the integrity stays.
        const none = await call(fake, 'POST', `chats/${chat.id}/append`, { body: { messages: [fresh] }, integrity: answer.body.integrity });
        assert.equal(none.body.appended, 0);
        assert.equal(none.body.integrity, answer.body.integrity);
        // A stale integrity, but the chat ends with these messages: the retry of a write that landed.
        const retry = await call(fake, 'POST', `chats/${chat.id}/append`, { body: { messages: [fresh, fresh] }, integrity: chat.integrity });
        assert.equal(retry.status, 200);
        assert.equal(retry.body.skipped, 2);
    });

    test('patch: all or nothing, a failed test is 409, an add equal to the message at its index is skipped', async () => {
        const { fake, chat, state } = await setup();
        const failed = await call(fake, 'POST', `chats/${chat.id}/patch`, {
            body: {
                operations: [
                    { op: 'replace', path: '/0/mes', value: 'changed' },
                    { op: 'test', path: '/1/mes', value: 'not this' },
                ],
            },
            integrity: chat.integrity,
        });
        assert.equal(failed.status, 409);
        assert.equal(failed.body.error, 'patch_conflict');
        assert.deepEqual(fake.state(chat.id), state);
        assert.equal(fake.integrity(chat.id), chat.integrity);
        const skipped = await call(fake, 'POST', `chats/${chat.id}/patch`, {
            body: { operations: [{ op: 'add', path: '/2', value: state.messages[2] }] },
            integrity: chat.integrity,
        });
        assert.deepEqual([skipped.body.applied, skipped.body.skipped], [0, 1]);
        assert.equal(skipped.body.integrity, chat.integrity, 'nothing changed');
        const applied = await call(fake, 'POST', `chats/${chat.id}/patch`, {
            body: {
                operations: [
                    { op: 'add', path: '/-', value: state.messages[4] },
                    { op: 'remove', path: '/0' },
                    { op: 'add', path: '/0/extra/ns', value: { a: 1 } },
                    { op: 'move', from: '/0', path: '/1' },
                ],
            },
            integrity: chat.integrity,
        });
        assert.equal(applied.status, 200);
        const expected = copy(state.messages);
        expected.push(copy(state.messages[4]));
        expected.shift();
        expected[0].extra.ns = { a: 1 };
        expected.splice(1, 0, expected.shift());
        assert.deepEqual(fake.state(chat.id).messages, expected);
        const invalid = await call(fake, 'POST', `chats/${chat.id}/patch`, {
            body: { operations: [{ op: 'add', path: '', value: [] }] },
            integrity: applied.body.integrity,
        });
        assert.equal(invalid.status, 400);
    });

    test('metadata: merge patch or JSON Patch by Content-Type', async () => {
        const { fake, chat } = await setup();
        const merged = await call(fake, 'PATCH', `chats/${chat.id}/metadata`, {
            body: { variables: { mood: null, hp: 3 }, added: [1, null] },
            integrity: chat.integrity,
            contentType: 'application/merge-patch+json',
        });
        assert.equal(merged.status, 200);
        assert.deepEqual(merged.body.chat_metadata.variables, { turns: 5, hp: 3 });
        assert.deepEqual(merged.body.chat_metadata.added, [1, null]);
        const patched = await call(fake, 'PATCH', `chats/${chat.id}/metadata`, {
            body: [{ op: 'add', path: '/variables/cleared', value: null }],
            integrity: merged.body.integrity,
            contentType: 'application/json-patch+json',
        });
        assert.equal(patched.status, 200);
        assert.deepEqual(fake.state(chat.id).metadata.variables, { turns: 5, hp: 3, cleared: null });
        const stale = await call(fake, 'PATCH', `chats/${chat.id}/metadata`, { body: {}, integrity: merged.body.integrity });
        assert.equal(stale.status, 409);
    });

    test('Idempotency-Key: the same request answers the stored answer; another request with the key is 422', async () => {
        const { fake, chat } = await setup();
        const request = { body: { messages: [{ mes: 'once', is_user: true }] }, integrity: chat.integrity, key: 'k1' };
        const first = await call(fake, 'POST', `chats/${chat.id}/append`, request);
        const again = await call(fake, 'POST', `chats/${chat.id}/append`, request);
        assert.deepEqual(again, first);
        assert.equal(fake.state(chat.id).messages.length, 6);
        assert.equal(fake.log.at(-1).replayed, true);
        const other = await call(fake, 'POST', `chats/${chat.id}/append`, { ...request, body: { messages: [{ mes: 'two' }] } });
        assert.equal(other.status, 422);
    });

    test('delta pages; Api.readChat reads them all, and again when a write lands in between', async () => {
        const { fake, api, chat } = await setup(1200);
        const page = await call(fake, 'GET', `chats/${chat.id}/delta?from_index=1000&limit=500`);
        assert.deepEqual(
            [page.body.messages.length, page.body.has_more, page.body.next_index, page.body.total_messages],
            [200, false, null, 1200],
        );
        assert.equal((await call(fake, 'GET', `chats/${chat.id}/delta?limit=501`)).status, 400);
        const whole = await api.readChat(chat.id);
        assert.deepEqual({ messages: whole.messages, metadata: whole.metadata }, fake.state(chat.id));
        assert.equal(whole.integrity, fake.integrity(chat.id));
        // Another device writes after the first page: the read starts over.
        let pages = 0;
        const racing = new Api({
            serverUrl: 'http://lk.test',
            token: 't',
            fetch: async (url, init) => {
                if (url.includes('/delta') && ++pages === 2) {
                    fake.writeAsOtherDevice(chat.id, (state) => {
                        state.messages.push({ mes: 'late', is_user: true });
                    });
                }
                return fake.fetch(url, init);
            },
        });
        const reread = await racing.readChat(chat.id);
        assert.equal(reread.messages.length, 1201);
        assert.equal(reread.messages.at(-1).mes, 'late');
        assert.equal(reread.integrity, fake.integrity(chat.id));
    });

    test('Api.readChat refuses a server whose pages do not move on, rather than asking for ever', async () => {
        const { fake, chat } = await setup(600);
        let asked = 0;
        const stuck = new Api({
            serverUrl: 'http://lk.test',
            token: 't',
            fetch: async (url, init) => {
                const answer = await fake.fetch(url, init);
                if (!url.includes('/delta')) return answer;
                asked++;
                const body = await answer.json();
                const text = JSON.stringify({ ...body, has_more: true, next_index: 0 }); // the first page, again
                return { ...answer, text: async () => text, json: async () => JSON.parse(text) };
            },
        });
        await assert.rejects(stuck.readChat(chat.id), /does not move on/);
        assert.equal(asked, 1);
    });

    test('offline: fetch rejects, Api answers an offline LorekeeperError; bytes are counted per path', async () => {
        const { fake, api, chat } = await setup();
        fake.offline = true;
        await assert.rejects(fake.fetch(`${URL_BASE}chats/`), TypeError);
        await assert.rejects(api.findChat('k'), (e) => e instanceof LorekeeperError && e.offline);
        fake.offline = false;
        fake.resetCounters();
        const body = JSON.stringify({ messages: [{ mes: 'x' }] });
        await call(fake, 'POST', `chats/${chat.id}/append`, { body, integrity: chat.integrity });
        assert.equal(fake.bytesByPath[`chats/${chat.id}/append`], Buffer.byteLength(body));
        assert.equal((await fake.fetch(`${URL_BASE}chats/`, { headers: { Authorization: 'Bearer wrong' } })).status, 401);
    });
});
