// The panel's notice of what waits for Run (lib/story.js).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { consentNotice } from '../lib/story.js';

test('a history waiting for Run is said with its estimate', () => {
    const pipeline = { state: 'awaiting_consent', estimate: { messages: 3000, calls: 557, prompt_tokens: 1203753, reply_tokens: 1 } };
    assert.equal(
        consentNotice(pipeline),
        '3,000 messages wait for Run in Lorekeeper before memories are made from them: about 557 model calls and 1,203,753 prompt tokens.',
    );
    assert.match(consentNotice({ state: 'awaiting_consent', estimate: null }), /press Run in Lorekeeper/);
});

test('nothing is said when nothing waits', () => {
    for (const state of ['idle', 'running', 'gathering', 'off']) assert.equal(consentNotice({ state, estimate: null }), '');
    assert.equal(consentNotice(null), '');
});
