// The recall card's words (lib/recall.js): what reached the prompt, and through which slot.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cardHtml, otherSlots } from '../lib/recall.js';

const longTerm = { slot: 'long', label: 'Long-term', count: 1, memories: [{ id: 7, kind: 'fact', text: 'Biscuit sleeps by the lamp.' }] };

test('a card whose recall found nothing names the memory the long-term slot gave the prompt', () => {
    const record = { injectionText: '', memories: [], tokenEstimate: 0, prompt: [longTerm] };
    assert.deepEqual(otherSlots(record), ['Long-term: 1 memory']);
    const html = cardHtml(1, record);
    assert.match(html, /<summary>Long-term: 1 memory · Lorekeeper recalled 0 memories/);
    assert.match(html, /the prompt held the memories below/);
    assert.match(html, /<li><b>Long-term<\/b> Biscuit sleeps by the lamp.<\/li>/);
});

test('the recall itself is counted once, and an older record without slots reads as before', () => {
    const triggered = { slot: 'triggered', label: 'Recalled', count: 2, memories: [{ id: 1 }, { id: 2 }] };
    assert.deepEqual(otherSlots({ prompt: [triggered] }), []);
    const html = cardHtml(3, { injectionText: 'Ash is tall.', memories: [{ id: 1 }], tokenEstimate: 5 });
    assert.match(html, /<summary>Lorekeeper recalled 1 memory \(~5 tokens\)<\/summary>/);
    assert.doesNotMatch(html, /lorekeeper-recall-prompt/);
});
