// The books the open chat uses (lib/books.js): which, and sent only when they changed.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bookDigest, booksOfChat, sendBooks } from '../lib/books.js';

test('a chat uses its chat lore, its character book and the global books, each once', () => {
    const used = booksOfChat({
        metadata: { world_info: 'Harbour' },
        character: { data: { extensions: { world: 'Mira' } } },
        globalNames: ['World', 'Harbour'],
    });
    assert.deepEqual(used, [
        { name: 'Harbour', use: 'chat' },
        { name: 'Mira', use: 'character' },
        { name: 'World', use: 'global' },
    ]);
});

test('a group leaves its members books out, and empty names are no books', () => {
    const used = booksOfChat({ metadata: { world_info: '' }, character: { data: { extensions: { world: 'Mira' } } }, isGroup: true, globalNames: [' '] });
    assert.deepEqual(used, []);
    assert.deepEqual(booksOfChat({}), []);
});

test('a book is sent once, again when it changes, and for each chat', async () => {
    const calls = [];
    const api = { serverUrl: 'http://lk', putChatBooks: async (chatId, books) => calls.push([chatId, books[0].name, books[0].data.entries[0].content]) };
    const world = { entries: { 0: { uid: 0, content: 'First.' } } };
    const load = async (name) => (name === 'Missing' ? null : world);
    const sent = new Map();
    const used = [{ name: 'World', use: 'global' }, { name: 'Missing', use: 'chat' }];
    assert.deepEqual(await sendBooks({ api, chatId: 1, used, load, sent }), ['World']);
    assert.deepEqual(await sendBooks({ api, chatId: 1, used, load, sent }), []);
    world.entries[0].content = 'Edited.';
    assert.deepEqual(await sendBooks({ api, chatId: 1, used, load, sent }), ['World']);
    assert.deepEqual(await sendBooks({ api, chatId: 2, used, load, sent }), ['World']);
    assert.deepEqual(calls, [[1, 'World', 'First.'], [1, 'World', 'Edited.'], [2, 'World', 'Edited.']]);
});

test('a refused book is not remembered as sent', async () => {
    const sent = new Map();
    const api = { serverUrl: 'http://lk', putChatBooks: async () => { throw new Error('400'); } };
    await assert.rejects(sendBooks({ api, chatId: 1, used: [{ name: 'World', use: 'chat' }], load: async () => ({ entries: {} }), sent }));
    assert.equal(sent.size, 0);
});

test('the digest follows the content', () => {
    assert.equal(bookDigest({ entries: { 0: 'a' } }), bookDigest({ entries: { 0: 'a' } }));
    assert.notEqual(bookDigest({ entries: { 0: 'a' } }), bookDigest({ entries: { 0: 'b' } }));
});
