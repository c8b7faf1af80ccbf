// The stored settings object (lib/settings.js): the panel, the sync and the interceptor share one object.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { storedSettings } from '../lib/settings.js';

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
