// The books the open chat uses (lib/books.js): which, and sent only when they changed.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bookDigest, booksOfChat, extraBooksOf, extraBooksOfChat, sendBooks, sendExtraBooks, sendNotGlobal } from '../lib/books.js';

test('a chat uses the global books, its chat lore and its character book, each once and global first', () => {
    const used = booksOfChat({
        metadata: { world_info: 'Harbour' },
        character: { data: { extensions: { world: 'Mira' } } },
        globalNames: ['World'],
    });
    assert.deepEqual(used, [
        { name: 'World', use: 'global' },
        { name: 'Harbour', use: 'chat' },
        { name: 'Mira', use: 'character' },
    ]);
    // A character's book that is also global is read as global, as SillyTavern reads it.
    const both = booksOfChat({ character: { data: { extensions: { world: 'World' } } }, globalNames: ['World'] });
    assert.deepEqual(both, [{ name: 'World', use: 'global' }]);
});

test("a group's members each name their book, a book two share names both, and empty names are no books", () => {
    const member = (name, world) => ({ name, data: { extensions: { world } } });
    const members = [member('Mira', 'Mira lore'), member('Rowan', 'Sea'), member('Hale', 'Sea'), member('Ash', ''), member('Gull', 'World')];
    const used = booksOfChat({ metadata: { world_info: '' }, character: member('Mira', 'Ignored'), isGroup: true, members, globalNames: ['World', ' '] });
    assert.deepEqual(used, [
        { name: 'World', use: 'global' },
        { name: 'Mira lore', use: 'character', characters: ['Mira'] },
        { name: 'Sea', use: 'character', characters: ['Rowan', 'Hale'] },
    ]);
    assert.deepEqual(booksOfChat({}), []);
});

test("a member's book is sent with its owners, and again when they change", async () => {
    const calls = [];
    const api = { serverUrl: 'http://lk', putChatBooks: async (chatId, books) => calls.push(books[0].characters) };
    const sent = new Map();
    const load = async () => ({ entries: { 0: { uid: 0, content: 'Sea.' } } });
    await sendBooks({ api, chatId: 1, used: [{ name: 'Sea', use: 'character', characters: ['Rowan'] }], load, sent });
    await sendBooks({ api, chatId: 1, used: [{ name: 'Sea', use: 'character', characters: ['Rowan'] }], load, sent });
    await sendBooks({ api, chatId: 1, used: [{ name: 'Sea', use: 'character', characters: ['Rowan', 'Hale'] }], load, sent });
    assert.deepEqual(calls, [['Rowan'], ['Rowan', 'Hale']]);
});

test('a book is sent once, again when it changes, and for each chat', async () => {
    const calls = [];
    const api = { serverUrl: 'http://lk', putChatBooks: async (chatId, books) => calls.push([chatId, books[0].name, books[0].data.entries[0].content]) };
    const world = { entries: { 0: { uid: 0, content: 'First.' } } };
    const load = async (name) => (name === 'Missing' ? null : world);
    const sent = new Map();
    const used = [{ name: 'World', use: 'global' }, { name: 'Missing', use: 'chat' }];
    const names = async (chatId) => (await sendBooks({ api, chatId, used, load, sent })).sent;
    assert.deepEqual(await names(1), ['World']);
    assert.deepEqual(await names(1), []);
    world.entries[0].content = 'Edited.';
    assert.deepEqual(await names(1), ['World']);
    assert.deepEqual(await names(2), ['World']);
    assert.deepEqual(calls, [[1, 'World', 'First.'], [1, 'World', 'Edited.'], [2, 'World', 'Edited.']]);
});

test('a refused book is said once and not sent again until it changes; an outage is tried again', async () => {
    const sent = new Map();
    let calls = 0;
    const refuse = async () => {
        calls += 1;
        throw Object.assign(new Error('entry 3, field key: does not compile'), { status: 400 });
    };
    const book = { entries: { 0: { content: 'x' } } };
    const options = { api: { serverUrl: 'http://lk', putChatBooks: refuse }, chatId: 1, used: [{ name: 'World', use: 'chat' }], load: async () => book, sent };
    assert.deepEqual(await sendBooks(options), { sent: [], refused: [{ name: 'World', reason: 'entry 3, field key: does not compile' }] });
    assert.deepEqual(await sendBooks(options), { sent: [], refused: [] });
    assert.equal(calls, 1);
    book.entries[0].content = 'fixed';
    await sendBooks(options);
    assert.equal(calls, 2);
    const offline = async () => { throw Object.assign(new Error('unreachable'), { status: 0, offline: true }); };
    const later = new Map();
    await assert.rejects(sendBooks({ ...options, api: { serverUrl: 'http://lk', putChatBooks: offline }, sent: later }));
    assert.equal(later.size, 0);
});

test('the digest follows the content', () => {
    assert.equal(bookDigest({ entries: { 0: 'a' } }), bookDigest({ entries: { 0: 'a' } }));
    assert.notEqual(bookDigest({ entries: { 0: 'a' } }), bookDigest({ entries: { 0: 'b' } }));
});

test('the books on no global list are said when they change, and a book named is sent again when global', async () => {
    const calls = [];
    const api = { serverUrl: 'http://lk', putChatBooks: async (chatId, books, notGlobal) => calls.push([chatId, books, notGlobal]) };
    const sent = new Map();
    const world = { entries: { 0: { uid: 0, content: 'Everywhere.' } } };
    const global = async (globalNames) => {
        await sendBooks({ api, chatId: 1, used: globalNames.map((name) => ({ name, use: 'global' })), load: async () => world, sent });
        return sendNotGlobal({ api, chatId: 1, allNames: ['World', 'Sea', ' ', 'x'.repeat(201)], globalNames, sent });
    };
    assert.equal(await global(['World', 'Sea']), null); // every book global, nothing was said before: no request
    assert.deepEqual(await global(['Sea']), ['World']); // World taken off the list
    assert.equal(await global(['Sea']), null); // the same again: not said again
    assert.deepEqual(await global(['World', 'Sea']), []); // World back on it: sent as global again, then the list
    assert.deepEqual(calls.map(([, books, notGlobal]) => [books.map((book) => `${book.name}:${book.use}`), notGlobal]), [
        [['World:global'], undefined],
        [['Sea:global'], undefined],
        [[], ['World']],
        [['World:global'], undefined],
        [[], []],
    ]);
});

test('a refused list is not repeated and an outage is tried again', async () => {
    let calls = 0;
    const refuse = async () => {
        calls += 1;
        throw Object.assign(new Error('not_global: too long'), { status: 400 });
    };
    const sent = new Map();
    const options = { api: { serverUrl: 'http://lk', putChatBooks: refuse }, chatId: 1, allNames: ['World'], globalNames: [], sent };
    await sendNotGlobal(options);
    await sendNotGlobal(options);
    assert.equal(calls, 1);
    const offline = async () => { throw Object.assign(new Error('unreachable'), { status: 0 }); };
    const later = new Map();
    await assert.rejects(sendNotGlobal({ ...options, api: { serverUrl: 'http://lk', putChatBooks: offline }, sent: later }));
    assert.equal(later.size, 0);
});

test("a character's Additional Lorebooks are found by its avatar's file name and sent after its own book", () => {
    const charLore = [{ name: 'Mira', extraBooks: ['Harbour', 'World', 'Harbour', '', 7] }, { name: 'Rowan', extraBooks: ['Sea'] }];
    const mira = { name: 'Mira', avatar: 'Mira.png', data: { extensions: { world: 'Mira lore' } } };
    assert.deepEqual(extraBooksOf(mira, charLore), ['Harbour', 'World']);
    assert.deepEqual(extraBooksOf({ name: 'Mira' }, charLore), []); // no avatar: no file name to find them by
    assert.deepEqual(extraBooksOf(mira, undefined), []);
    const used = booksOfChat({ metadata: { world_info: 'Chat lore' }, character: mira, globalNames: ['World'], charLore });
    assert.deepEqual(used, [
        { name: 'World', use: 'global' },
        { name: 'Chat lore', use: 'chat' },
        { name: 'Mira lore', use: 'character' },
        { name: 'Harbour', use: 'extra' },
    ]);
    assert.deepEqual(extraBooksOfChat({ character: mira, charLore }), [{ character: 'Mira', books: ['Harbour', 'World'] }]);
    const rowan = { name: 'Rowan', avatar: 'Rowan.webp', data: { extensions: {} } };
    const group = { isGroup: true, members: [mira, rowan], charLore };
    assert.deepEqual(booksOfChat(group).map((book) => [book.name, book.use]), [['Mira lore', 'character'], ['Harbour', 'extra'], ['World', 'extra'], ['Sea', 'extra']]);
    assert.deepEqual(extraBooksOfChat(group), [{ character: 'Mira', books: ['Harbour', 'World'] }, { character: 'Rowan', books: ['Sea'] }]);
});

test('the Additional Lorebooks are said once per chat, again when they change, and an empty list takes them off', async () => {
    const calls = [];
    const api = { serverUrl: 'http://lk', putChatBooks: async (chatId, books, notGlobal, extraBooks) => calls.push([chatId, books, notGlobal, extraBooks]) };
    const sent = new Map();
    const say = (chatId, books) => sendExtraBooks({ api, chatId, extras: [{ character: 'Mira', books }], sent });
    assert.equal(await say(1, ['Harbour']), true);
    assert.equal(await say(1, ['Harbour']), false);
    assert.equal(await say(2, ['Harbour']), true); // another chat: said there too
    assert.equal(await say(1, []), true);
    assert.equal(await sendExtraBooks({ api, chatId: 1, extras: [], sent }), false); // no character: nothing to say
    assert.deepEqual(calls, [
        [1, [], undefined, [{ character: 'Mira', books: ['Harbour'] }]],
        [2, [], undefined, [{ character: 'Mira', books: ['Harbour'] }]],
        [1, [], undefined, [{ character: 'Mira', books: [] }]],
    ]);
    const refused = new Map();
    let tries = 0;
    const refuse = async () => {
        tries += 1;
        throw Object.assign(new Error('bad'), { status: 400 });
    };
    const options = { api: { serverUrl: 'http://lk', putChatBooks: refuse }, chatId: 1, extras: [{ character: 'Mira', books: ['x'] }], sent: refused };
    await sendExtraBooks(options);
    await sendExtraBooks(options);
    assert.equal(tries, 1); // a refusal is not repeated
    const offline = async () => { throw Object.assign(new Error('unreachable'), { status: 0 }); };
    await assert.rejects(sendExtraBooks({ ...options, api: { serverUrl: 'http://lk', putChatBooks: offline }, sent: new Map() }));
});
