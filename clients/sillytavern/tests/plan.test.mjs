// The sync planner (lib/plan.js) and the JSON helpers it stands on (lib/json.js).
//
// Replay one scenario of a property test: LK_SEED=<seed> node --test tests/plan.test.mjs
// More scenarios: LK_SCENARIOS=3000 node --test tests/plan.test.mjs

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Api, newKey } from '../lib/api.js';
import { PatchError, applyMergePatch, applyPatch, jsonEqual, mergePatchBetween, toJson } from '../lib/json.js';
import { MAX_APPEND, applyWrites, changedRegion, mergeStates, planWrites } from '../lib/plan.js';
import { toJsonl } from '../lib/sync.js';
import { FakeLorekeeper } from './fake_server.mjs';
import { APPEND_MUTATIONS, ChatGen, Rand, copy, markerCounts, mutate } from './helpers.mjs';

const SCENARIOS = Number(process.env.LK_SCENARIOS) || 300;
const ONLY_SEED = process.env.LK_SEED === undefined ? null : Number(process.env.LK_SEED);
const seeds = (base) => (ONLY_SEED !== null ? [ONLY_SEED] : Array.from({ length: SCENARIOS }, (_, i) => base + i * 7919));

const bytes = (value) => Buffer.byteLength(JSON.stringify(value));
const gen = (seed = 1, prefix = 'm') => new ChatGen(new Rand(seed), prefix);

/** A chat of `count` SillyTavern-shaped messages. */
function chat(count, seed = 1) {
    return gen(seed).chat(count);
}

/** `planWrites(base, live)`, checked to turn base into live. */
function plan(base, live) {
    const writes = planWrites(base, live);
    const result = applyWrites(base, writes);
    assert.ok(jsonEqual(result, toJson(live)), 'applyWrites(base, planWrites(base, live)) is not live');
    return writes;
}

/** Send writes to a fake Lorekeeper holding `base`; answers what it holds afterwards. */
async function sendToFake(base, writes, fake = new FakeLorekeeper()) {
    const api = new Api({ serverUrl: 'http://lk.test', token: 't', fetch: fake.fetch });
    const answer = await api.importChat({ jsonl: toJsonl(base), clientKey: `k${fake.chats.size}` });
    let integrity = answer.integrity;
    for (const write of writes) integrity = (await api.send(answer.id, write, integrity, newKey())).integrity;
    assert.equal(integrity, fake.integrity(answer.id));
    return fake.state(answer.id);
}

describe('json helpers', () => {
    test('jsonEqual ignores key order and undefined members, not types', () => {
        assert.ok(jsonEqual({ a: 1, b: [1, { c: null }] }, { b: [1, { c: null }], a: 1 }));
        assert.ok(jsonEqual({ a: 1, u: undefined }, { a: 1 }));
        assert.ok(!jsonEqual({ a: 1 }, { a: '1' }));
        assert.ok(!jsonEqual([1, 2], { 0: 1, 1: 2 }));
        assert.ok(!jsonEqual({ a: null }, {}));
        assert.ok(!jsonEqual({ constructor: 1 }, {}));
        assert.ok(!jsonEqual({}, { toString: 1 }));
        assert.ok(jsonEqual({ a: 1 }, { a: 1, u: undefined }) && jsonEqual({ a: undefined }, { b: undefined }));
        assert.ok(!jsonEqual({ a: 1, b: undefined }, { b: 2 }) && !jsonEqual({ a: 1 }, { a: 1, b: 2 }));
        assert.ok(jsonEqual([NaN, Infinity], [null, null]) && !jsonEqual(NaN, 0));
        assert.ok(jsonEqual({ at: new Date(0) }, { at: '1970-01-01T00:00:00.000Z' }));
    });

    test('jsonEqual says what JSON.stringify with sorted keys says, on random values', () => {
        const canonical = (value) => JSON.stringify(value, (_, v) =>
            v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v);
        const rand = new Rand(7);
        const leaf = () => [null, true, false, 0, 1, NaN, '', 'a', 'b', undefined, new Date(0)][rand.int(11)];
        const value = (depth) => {
            if (depth === 0 || rand.int(3) === 0) return leaf();
            if (rand.int(2) === 0) return Array.from({ length: rand.int(3) }, () => value(depth - 1) ?? null);
            return Object.fromEntries(Array.from({ length: rand.int(4) }, () => ['abcd'[rand.int(4)], value(depth - 1)]));
        };
        let equal = 0;
        for (let n = 0; n < 5000; n++) {
            const a = value(3);
            const b = rand.int(2) === 0 ? value(3) : JSON.parse(JSON.stringify({ v: a })).v;
            if (a === undefined || b === undefined) continue;
            const expected = canonical(a) === canonical(b);
            equal += expected;
            assert.equal(jsonEqual(a, b), expected, `${canonical(a)} vs ${canonical(b)}`);
        }
        assert.ok(equal > 1000, `only ${equal} equal pairs`);
    });

    test('applyPatch: add, remove, replace, test, escaped tokens and the end of an array', () => {
        const doc = { list: [1, 2], 'a/b': { 'x~y': 1 } };
        const out = applyPatch(copy(doc), [
            { op: 'add', path: '/list/-', value: 3 },
            { op: 'add', path: '/list/0', value: 0 },
            { op: 'remove', path: '/list/1' },
            { op: 'replace', path: '/a~1b/x~0y', value: { deep: null } },
            { op: 'test', path: '/a~1b/x~0y/deep', value: null },
            { op: 'add', path: '/new', value: 'v' },
        ]);
        assert.deepEqual(out, { list: [0, 2, 3], 'a/b': { 'x~y': { deep: null } }, new: 'v' });
    });

    test('applyPatch: a failed test, a missing member or an index out of range throws PatchError', () => {
        assert.throws(() => applyPatch({ a: 1 }, [{ op: 'test', path: '/a', value: 2 }]), PatchError);
        assert.throws(() => applyPatch({ a: 1 }, [{ op: 'replace', path: '/b', value: 2 }]), PatchError);
        assert.throws(() => applyPatch({ a: 1 }, [{ op: 'remove', path: '/constructor' }]), PatchError);
        assert.throws(() => applyPatch([1], [{ op: 'add', path: '/2', value: 2 }]), PatchError);
        assert.throws(() => applyPatch([1], [{ op: 'remove', path: '/01' }]), PatchError);
    });

    test('mergePatchBetween: nested changes, deletions, and null when a null must be written', () => {
        const before = { a: 1, b: { c: 1, d: { e: 1 } }, gone: 1, list: [1] };
        const after = { a: 1, b: { c: 2, d: { e: 1, f: [null] } }, list: [1, null], added: { x: 1 } };
        const patch = mergePatchBetween(before, after);
        assert.deepEqual(patch, { gone: null, b: { c: 2, d: { f: [null] } }, list: [1, null], added: { x: 1 } });
        assert.deepEqual(applyMergePatch(before, patch), after);
        assert.equal(mergePatchBetween({ a: { b: 1 } }, { a: { b: 1, c: null } }), null);
        assert.equal(mergePatchBetween({}, { a: null }), null);
        assert.equal(mergePatchBetween({ a: 1 }, { a: { b: { c: null } } }), null);
        assert.deepEqual(mergePatchBetween({ a: 1 }, { a: 1 }), {});
    });
});

describe('changedRegion', () => {
    test('finds the common prefix and suffix', () => {
        assert.deepEqual(changedRegion([1, 2, 3], [1, 2, 3]), { start: 3, beforeEnd: 3, afterEnd: 3 });
        assert.deepEqual(changedRegion([1, 2, 3], [1, 2, 3, 4]), { start: 3, beforeEnd: 3, afterEnd: 4 });
        assert.deepEqual(changedRegion([1, 2, 3], [1, 3]), { start: 1, beforeEnd: 2, afterEnd: 1 });
        assert.deepEqual(changedRegion([1, 2, 3], [1, 9, 3]), { start: 1, beforeEnd: 2, afterEnd: 2 });
        assert.deepEqual(changedRegion([], [1]), { start: 0, beforeEnd: 0, afterEnd: 1 });
        assert.deepEqual(changedRegion([1, 1], [1, 1, 1]), { start: 2, beforeEnd: 2, afterEnd: 3 });
    });
});

describe('planWrites', () => {
    test('an append sends one `append` write carrying only the new message', () => {
        const base = chat(40);
        const live = copy(base);
        const message = gen(99).assistant();
        live.messages.push(message);
        const writes = plan(base, live);
        assert.deepEqual(writes, [{ kind: 'append', messages: [message] }]);
    });

    test('nothing changed: no writes', () => {
        const base = chat(10);
        assert.deepEqual(planWrites(base, copy(base)), []);
    });

    test("an edit of message 2500's `mes` in a 5,000-message chat writes under 2 KB", (t) => {
        const base = chat(5000);
        const average = bytes(base.messages) / base.messages.length;
        const live = copy(base);
        live.messages[2500].mes = `${live.messages[2500].mes} (edited)`;
        const writes = plan(base, live);
        const size = bytes(writes);
        t.diagnostic(`5,000 messages of ${average.toFixed(0)} bytes on average; the edit's writes: ${size} bytes`);
        assert.ok(average > 250 && average < 400, `messages average ${average} bytes`);
        assert.ok(size < 2048, `${size} bytes`);
        assert.equal(writes.length, 1);
        assert.equal(writes[0].kind, 'patch');
        assert.ok(writes[0].operations.some((op) => op.op === 'test' && op.path.startsWith('/2500/')));
        assert.ok(writes[0].operations.some((op) => op.op === 'replace' && op.path === '/2500/mes'));
    });

    test('a swipe sends field-level operations, not the whole message', async () => {
        const base = chat(30);
        const live = copy(base);
        const message = live.messages[21];
        assert.equal(message.is_user, false);
        message.swipes.push('«m99» another answer');
        message.swipe_info.push({ send_date: 'now', gen_started: 'now', gen_finished: 'now', extra: {} });
        message.swipe_id = 1;
        message.mes = '«m99» another answer';
        const writes = plan(base, live);
        assert.equal(writes.length, 1);
        const ops = writes[0].operations;
        assert.ok(ops.every((op) => op.path.startsWith('/21/')), JSON.stringify(ops));
        const paths = ops.filter((op) => op.op !== 'test').map((op) => op.path).sort();
        assert.deepEqual(paths, ['/21/mes', '/21/swipe_id', '/21/swipe_info/-', '/21/swipes/-']);
        assert.ok(bytes(writes) < bytes(message), 'the swipe costs less than the message');
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('a deletion in the middle is one `remove` guarded by a `test`', async () => {
        const base = chat(30);
        const live = copy(base);
        live.messages.splice(12, 1);
        const writes = plan(base, live);
        assert.deepEqual(writes, [
            {
                kind: 'patch',
                operations: [
                    { op: 'test', path: '/12/send_date', value: base.messages[12].send_date },
                    { op: 'remove', path: '/12' },
                ],
            },
        ]);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('/hide (is_system flips to true) is a tiny patch', async (t) => {
        const base = chat(30);
        const live = copy(base);
        live.messages[4].is_system = true;
        const writes = plan(base, live);
        assert.deepEqual(writes, [
            {
                kind: 'patch',
                operations: [
                    { op: 'test', path: '/4/send_date', value: base.messages[4].send_date },
                    { op: 'replace', path: '/4/is_system', value: true },
                ],
            },
        ]);
        t.diagnostic(`/hide of one message: ${bytes(writes)} bytes`);
        assert.ok(bytes(writes) < 200, `${bytes(writes)} bytes`);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
        // /hide 5-7 and /unhide: the same, per message.
        const range = copy(live);
        for (const i of [5, 6, 7]) range.messages[i].is_system = true;
        range.messages[4].is_system = false;
        const more = plan(live, range);
        const changes = more[0].operations.filter((op) => op.op !== 'test');
        assert.deepEqual(changes, [4, 5, 6, 7].map((i) => ({ op: 'replace', path: `/${i}/is_system`, value: i !== 4 })));
        assert.ok(jsonEqual(await sendToFake(live, more), range));
    });

    for (const [from, to] of [
        [3, 17],
        [17, 3],
        [0, 29],
        [29, 0],
        [10, 11],
    ]) {
        test(`moving message ${from} to ${to}`, async () => {
            const base = chat(30);
            const live = copy(base);
            const [message] = live.messages.splice(from, 1);
            live.messages.splice(to, 0, message);
            const writes = plan(base, live);
            assert.ok(jsonEqual(await sendToFake(base, writes), live));
        });
    }

    test('a metadata change in nested objects is a merge patch of the changed keys', async () => {
        const base = chat(5);
        base.metadata.variables = { mood: 'calm', inventory: { sword: 1, shield: 1 } };
        const live = copy(base);
        live.metadata.variables.inventory.sword = 2;
        delete live.metadata.variables.inventory.shield;
        live.metadata.quickReply = { sets: ['a'] };
        delete live.metadata.tags;
        const writes = plan(base, live);
        const expected = { variables: { inventory: { sword: 2, shield: null } }, quickReply: { sets: ['a'] } };
        if ('tags' in base.metadata) expected.tags = null;
        assert.deepEqual(writes, [{ kind: 'metadata', merge: expected }]);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('a metadata value with a null inside a changed object falls back to JSON Patch', async () => {
        const base = chat(5);
        base.metadata.variables = { mood: 'calm' };
        const live = copy(base);
        live.metadata.variables.cleared = null;
        live.metadata.other = 1;
        const writes = plan(base, live);
        assert.equal(writes.length, 1);
        assert.equal(writes[0].kind, 'metadata');
        assert.equal(writes[0].merge, undefined);
        assert.ok(Array.isArray(writes[0].operations));
        assert.deepEqual(
            writes[0].operations.find((op) => op.path === '/variables'),
            { op: 'replace', path: '/variables', value: { mood: 'calm', cleared: null } },
        );
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('the same message sent twice in a row is a patch adding it, not an append the server would drop', async () => {
        const base = chat(6);
        const live = copy(base);
        live.messages.push(copy(base.messages[5]));
        const writes = plan(base, live);
        assert.ok(!writes.some((w) => w.kind === 'append'), JSON.stringify(writes));
        assert.deepEqual(writes, [{ kind: 'patch', operations: [{ op: 'add', path: '/6', value: base.messages[5] }] }]);
        const server = await sendToFake(base, writes);
        assert.equal(server.messages.length, 7);
        assert.ok(jsonEqual(server, live));
        // An append of it would be dropped as a retry:
        const dropped = await sendToFake(base, [{ kind: 'append', messages: [base.messages[5]] }]);
        assert.equal(dropped.messages.length, 6);
    });

    test('an edit plus the same message sent twice: the add is not mistaken for a retry', async () => {
        const base = chat(6);
        const live = copy(base);
        live.messages[0].mes = 'edited';
        live.messages.push(copy(live.messages[5]));
        const writes = plan(base, live);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('an insertion equal to the message after it reaches the server', async () => {
        const base = chat(6);
        const live = copy(base);
        live.messages.splice(3, 0, copy(live.messages[3]), copy(live.messages[3]));
        live.messages[1].mes = 'edited';
        const writes = plan(base, live);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('a long append is split, and no part starts with a copy of the message before it', async () => {
        const base = chat(3);
        const live = copy(base);
        const g = gen(5);
        for (let i = 0; i < MAX_APPEND + 50; i++) live.messages.push(g.user(20));
        // The same message twice exactly where a split would fall.
        live.messages[3 + MAX_APPEND] = copy(live.messages[2 + MAX_APPEND]);
        const writes = plan(base, live);
        assert.ok(writes.length >= 2);
        assert.ok(writes.every((w) => w.kind !== 'append' || w.messages.length <= MAX_APPEND));
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });

    test('keys named like Object.prototype members are synced as any other', async () => {
        const base = chat(4);
        base.messages[1].extra.constructor = 'a';
        base.metadata.variables.toString = 1;
        const live = copy(base);
        delete live.messages[1].extra.constructor;
        live.messages[2].extra.constructor = { b: 1 };
        live.messages[3].extra.valueOf = 1;
        delete live.metadata.variables.toString;
        live.metadata.variables.constructor = null;
        const writes = plan(base, live);
        assert.ok(jsonEqual(await sendToFake(base, writes), live));
    });
});

describe('planWrites property', () => {
    test(`${seeds(0).length} random scenarios: applyWrites and the fake server both give live`, async () => {
        const fake = new FakeLorekeeper();
        const kinds = {};
        for (const seed of seeds(0x5eed)) {
            const rand = new Rand(seed);
            const g = new ChatGen(rand);
            const base = g.chat(rand.int(25));
            const { state: live, done } = mutate(base, rand, g);
            for (const kind of done) kinds[kind] = (kinds[kind] ?? 0) + 1;
            const context = () => `seed ${seed} (replay: LK_SEED=${seed}), mutations: ${done.join(', ')}`;
            let writes;
            try {
                writes = planWrites(base, live);
                assert.ok(jsonEqual(applyWrites(base, writes), toJson(live)), 'applyWrites(base, writes) is not live');
                const server = await sendToFake(base, writes, fake);
                assert.ok(jsonEqual(server, toJson(live)), 'the fake server does not hold live');
            } catch (error) {
                console.error(`planWrites property failed: ${context()}\nwrites: ${JSON.stringify(writes)}`);
                error.message = `${context()}: ${error.message}`;
                throw error;
            }
        }
        for (const kind of Object.keys(kinds)) assert.ok(kinds[kind] > 0);
    });
});

describe('mergeStates', () => {
    const base = () => chat(12, 3);

    test('both appended: remote first, then local', () => {
        const b = base();
        const local = copy(b);
        const remote = copy(b);
        local.messages.push(gen(1, 'L').user());
        remote.messages.push(gen(2, 'R').assistant(), gen(3, 'R').user());
        const { merged, clean } = mergeStates(b, local, remote);
        assert.ok(clean);
        assert.deepEqual(merged.messages, [...b.messages, ...remote.messages.slice(12), ...local.messages.slice(12)]);
    });

    test('local edits message 3 while remote edits message 7: both kept', () => {
        const b = base();
        const local = copy(b);
        const remote = copy(b);
        local.messages[3].mes = 'local edit';
        remote.messages[7].mes = 'remote edit';
        const { merged, clean } = mergeStates(b, local, remote);
        assert.ok(clean);
        const expected = copy(b);
        expected.messages[3].mes = 'local edit';
        expected.messages[7].mes = 'remote edit';
        assert.deepEqual(merged, expected);
    });

    test('both edit different keys of the same message: both kept', () => {
        const b = base();
        const local = copy(b);
        const remote = copy(b);
        local.messages[5].mes = 'local edit';
        remote.messages[5].extra.bme_recall = { text: 'recalled' };
        remote.metadata.variables.mood = 'tense';
        local.metadata.note_prompt = 'a note';
        const { merged, clean } = mergeStates(b, local, remote);
        assert.ok(clean);
        assert.equal(merged.messages[5].mes, 'local edit');
        assert.deepEqual(merged.messages[5].extra.bme_recall, { text: 'recalled' });
        assert.equal(merged.metadata.variables.mood, 'tense');
        assert.equal(merged.metadata.note_prompt, 'a note');
    });

    test('both edit the same key differently: not clean, and the merge is the local chat', () => {
        const b = base();
        const local = copy(b);
        const remote = copy(b);
        local.messages[5].mes = 'local edit';
        remote.messages[5].mes = 'remote edit';
        const { merged, clean } = mergeStates(b, local, remote);
        assert.equal(clean, false);
        assert.deepEqual(merged.messages, local.messages);
    });

    test('local moves a message while remote edits one of those it displaced: not clean, no edit lands on another message', () => {
        const b = base();
        const local = copy(b);
        const remote = copy(b);
        local.messages.splice(2, 0, local.messages.splice(6, 1)[0]); // message 6 moved up to 2
        remote.messages[4].extra.bme_recall = { text: 'for message 4' };
        const { merged, clean } = mergeStates(b, local, remote);
        if (clean) {
            const target = merged.messages.find((m) => m.mes === b.messages[4].mes);
            assert.deepEqual(target.extra.bme_recall, { text: 'for message 4' });
            assert.equal(merged.messages.filter((m) => m.extra?.bme_recall).length, 1);
        }
        assert.equal(clean, false);
    });

    test('keys named like Object.prototype members merge as any other', () => {
        const b = { messages: [{ mes: 'x', extra: { constructor: 'a', foo: 1 } }], metadata: { toString: 1 } };
        const local = { messages: [{ mes: 'x', extra: { foo: 1 } }], metadata: {} };
        const remote = { messages: [{ mes: 'x', extra: { constructor: 'a', foo: 2 } }], metadata: { toString: 1, b: 1 } };
        const { merged, clean } = mergeStates(b, local, remote);
        assert.ok(clean);
        assert.deepEqual(merged, { messages: [{ mes: 'x', extra: { foo: 2 } }], metadata: { b: 1 } });
    });

    test('only one side changed: the merge is that side', () => {
        const b = base();
        const changed = copy(b);
        changed.messages.splice(2, 1);
        changed.metadata.x = 1;
        assert.deepEqual(mergeStates(b, copy(b), changed), { merged: changed, clean: true });
        assert.deepEqual(mergeStates(b, changed, copy(b)), { merged: changed, clean: true });
    });

    test(`property: ${seeds(0).length} random local and remote changes from one base`, () => {
        let cleanCount = 0;
        for (const seed of seeds(0xbee)) {
            const rand = new Rand(seed);
            const g = new ChatGen(rand, 'B');
            const b = g.chat(rand.int(20));
            const appendOnly = rand.chance(0.3);
            const kinds = appendOnly ? APPEND_MUTATIONS : undefined;
            const local = mutate(b, rand, new ChatGen(rand, 'L'), { kinds, max: 6 });
            const remote = mutate(b, rand, new ChatGen(rand, 'R'), { kinds, max: 6 });
            const context = `seed ${seed} (replay: LK_SEED=${seed}); local: ${local.done.join(', ')}; remote: ${remote.done.join(', ')}`;
            let result;
            try {
                result = mergeStates(b, local.state, remote.state);
                const { merged, clean } = result;
                assert.ok(jsonEqual(merged, toJson(merged)), 'the merge is not plain JSON');
                if (clean) {
                    cleanCount++;
                    const got = markerCounts(merged.messages);
                    for (const [side, state] of [
                        ['local', local.state],
                        ['remote', remote.state],
                    ]) {
                        const prefix = side === 'local' ? 'L' : 'R';
                        for (const [marker, count] of markerCounts(state.messages)) {
                            if (!marker.startsWith(prefix)) continue;
                            assert.equal(got.get(marker) ?? 0, count, `${side}'s message «${marker}»`);
                        }
                    }
                }
                if (appendOnly) {
                    assert.ok(clean, 'appends only must merge cleanly');
                    const n = b.messages.length;
                    assert.ok(
                        jsonEqual(merged.messages, [...b.messages, ...remote.state.messages.slice(n), ...local.state.messages.slice(n)]),
                        'merged is base + remote new + local new',
                    );
                    assert.ok(jsonEqual(merged.metadata, b.metadata));
                }
            } catch (error) {
                console.error(`mergeStates property failed: ${context}`);
                error.message = `${context}: ${error.message}`;
                throw error;
            }
        }
        assert.ok(cleanCount > 0);
    });
});

test('Date objects in the live chat compare and travel as the ISO strings SillyTavern saves', () => {
    const started = new Date('2026-11-22T21:58:41.304Z');
    const saved = { name: 'Mira', is_user: false, mes: 'Mira nods.', gen_started: started.toISOString() };
    const base = { messages: [saved], metadata: {} };
    assert.deepEqual(planWrites(base, { messages: [{ ...saved, gen_started: started }], metadata: {} }), []);
    const later = new Date('2026-11-22T22:00:00.000Z');
    const writes = planWrites(base, { messages: [{ ...saved, gen_started: later }], metadata: {} });
    const live = { messages: [{ ...saved, gen_started: later.toISOString() }], metadata: {} };
    assert.deepEqual(applyWrites(base, writes), live);
    assert.ok(JSON.stringify(writes).includes('2026-11-22T22:00:00.000Z'));
});

test('a change both sides made is merged once, not twice', () => {
    const m = (text) => ({ name: 'User', is_user: true, mes: text, send_date: text });
    const base = { messages: [m('a'), m('b')], metadata: {} };
    const both = { messages: [m('a'), m('b'), m('M'), m('R')], metadata: {} };
    assert.deepEqual(mergeStates(base, both, both), { merged: both, clean: true });
    const local = { messages: [m('a'), m('b'), m('M'), m('R'), m('X')], metadata: {} };
    const remote = { messages: [m('a'), m('b'), m('M'), m('R'), m('Y')], metadata: {} };
    const { merged, clean } = mergeStates(base, local, remote);
    assert.equal(clean, true);
    assert.deepEqual(merged.messages.map((x) => x.mes), ['a', 'b', 'M', 'R', 'Y', 'X']);
});

test('a device that never synced, holding an older copy, takes the newer messages instead of deleting them', async () => {
    const { commonStart } = await import('../lib/sync.js');
    const m = (text) => ({ name: 'User', is_user: true, mes: text, send_date: text });
    const older = { messages: ['a', 'b', 'c'].map(m), metadata: { integrity: 's' } };
    const server = { messages: ['a', 'b', 'c', 'd', 'e'].map(m), metadata: { integrity: 's' } };
    const behind = mergeStates(commonStart(older, server), older, server);
    assert.deepEqual(behind, { merged: server, clean: true });
    const diverged = { messages: ['a', 'b', 'x'].map(m), metadata: { integrity: 's', note: 1 } };
    const both = mergeStates(commonStart(diverged, server), diverged, server);
    assert.equal(both.clean, true);
    assert.deepEqual(both.merged.messages.map((x) => x.mes), ['a', 'b', 'c', 'd', 'e', 'x']);
    assert.deepEqual(both.merged.metadata, { integrity: 's', note: 1 });
});
