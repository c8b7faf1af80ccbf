// The stored settings object (lib/settings.js): the panel, the sync and the interceptor share one object.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { notSyncedReason, storedSettings } from '../lib/settings.js';

const DEFAULTS = { server_url: 'http://127.0.0.1:8720', api_token: '', sync: true };

test('every call answers the same stored object, so a write through one is seen by the next', () => {
    const all = {};
    const panel = storedSettings(all, 'lorekeeper', DEFAULTS);
    const later = storedSettings(all, 'lorekeeper', DEFAULTS);
    assert.equal(panel, later);
    panel.server_url = 'http://192.0.2.7:8720';
    assert.equal(storedSettings(all, 'lorekeeper', DEFAULTS).server_url, 'http://192.0.2.7:8720');
    assert.equal(all.lorekeeper, panel, 'the object SillyTavern saves is the one written');
});

test('missing defaults are filled in place and saved values are kept', () => {
    const saved = { server_url: 'https://lk.example', sync: false };
    const all = { lorekeeper: saved };
    const s = storedSettings(all, 'lorekeeper', DEFAULTS);
    assert.equal(s, saved);
    assert.deepEqual(s, { server_url: 'https://lk.example', sync: false, api_token: '' });
});

test('the defaults object is never handed out or changed', () => {
    const all = {};
    const s = storedSettings(all, 'lorekeeper', DEFAULTS);
    assert.notEqual(s, DEFAULTS);
    s.api_token = 'lk_secret';
    assert.equal(DEFAULTS.api_token, '');
    all.lorekeeper = null;
    assert.deepEqual(storedSettings(all, 'lorekeeper', DEFAULTS), DEFAULTS);
});

test("the Assistant's chat is not synced unless asked for; other chats are", () => {
    const base = { configured: true, clientKey: 'st:char:Mira.png:c1', avatar: 'Mira.png', sync: true, syncAssistant: false, inject: true };
    assert.equal(notSyncedReason(base), null);
    assert.match(notSyncedReason({ ...base, tokenProblem: 'the token holds a character no token has' }), /^Not connected: the token holds/);
    const assistant = { ...base, clientKey: 'st:char:default_Assistant.png:c1', avatar: 'default_Assistant.png' };
    assert.match(notSyncedReason(assistant), /Assistant chat is not synced/);
    assert.equal(notSyncedReason({ ...assistant, syncAssistant: true }), null);
    // A person who made Mira their welcome-page assistant: Mira is the Assistant, default_Assistant.png is not.
    assert.match(notSyncedReason({ ...base, assistantAvatar: 'Mira.png' }), /Assistant/);
    assert.equal(notSyncedReason({ ...assistant, assistantAvatar: 'Mira.png' }), null);
});

test('not connected, no chat and sync off are said first', () => {
    const base = { configured: true, clientKey: 'k', avatar: 'default_Assistant.png', sync: true, syncAssistant: false, inject: false };
    assert.match(notSyncedReason({ ...base, configured: false }), /Not connected/);
    assert.equal(notSyncedReason({ ...base, clientKey: null }), 'No chat open.');
    assert.equal(notSyncedReason({ ...base, sync: false }), 'Sync is off.');
});

test('an address typed without http:// is said before anything is tried', () => {
    const state = { configured: true, urlProblem: 'the address needs http:// or https:// before it: http://lk.example (or https://lk.example).', clientKey: 'k', avatar: 'Mira.png', sync: true, syncAssistant: false, inject: true };
    assert.equal(notSyncedReason(state), `Not connected: ${state.urlProblem}`);
    assert.equal(notSyncedReason({ ...state, urlProblem: '' }), null);
});
