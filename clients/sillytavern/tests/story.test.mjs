// The panel's words for a chat's extraction: its progress line and what waits for Run (lib/story.js).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { consentNotice, pipelineText } from '../lib/story.js';

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

test('progress is the tier that has read least, the rolling summary aside', () => {
    const pipeline = {
        state: 'running',
        message_count: 120,
        coverage: [{ tier: 'compaction', through: 10 }, { tier: 'session', through: 100 }, { tier: 'longterm', through: 80 }],
        failed: [],
    };
    assert.equal(pipelineText(pipeline), '80 of 120 messages · running');
});

test('the profiles, rebuilt every so many messages, are not the progress either', () => {
    const pipeline = {
        state: 'gathering',
        message_count: 15,
        coverage: [{ tier: 'session', through: 10 }, { tier: 'longterm', through: 10 }, { tier: 'profiles', through: 0 }],
    };
    assert.equal(pipelineText(pipeline), '10 of 15 messages · waiting for more messages');
});

test('failed jobs are counted, and a state the panel does not know is shown as given', () => {
    assert.equal(pipelineText({ state: 'idle', message_count: 0, coverage: [], failed: [{}, {}] }), 'up to date · 2 failed (retry in Lorekeeper)');
    assert.equal(pipelineText({ state: 'awaiting_consent', message_count: 40, coverage: [] }), 'waiting for you to run it in Lorekeeper');
    assert.equal(pipelineText({ state: 'rebuilding' }), 'rebuilding');
});
