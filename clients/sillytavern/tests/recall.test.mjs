// The recall card's words (lib/recall.js): what reached the prompt, and through which slot.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cardHtml, otherSlots, recallFits, SHOWN } from '../lib/recall.js';

const longTerm = { slot: 'long', label: 'Long-term', count: 1, memories: [{ id: 7, kind: 'fact', text: 'Biscuit sleeps by the lamp.' }] };

test('a card whose recall found nothing names the memory the long-term slot gave the prompt', () => {
    const record = { injectionText: '', memories: [], tokenEstimate: 0, prompt: [longTerm] };
    assert.deepEqual(otherSlots(record), ['Long-term: 1 memory']);
    const html = cardHtml(1, record);
    assert.match(html, /<summary>Long-term: 1 memory · nothing more recalled for this turn<\/summary>/);
    assert.match(cardHtml(1, { injectionText: '', memories: [] }), /<summary>Lorekeeper recalled nothing for this turn</);
    assert.match(html, /placeholder="The text recalled for this turn, as the model is given it/);
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

test("a record of any size draws at most SHOWN nodes, links and prompt memories, each node's links found once", () => {
    const nodes = Array.from({ length: 20_000 }, (_, n) => ({ id: `m${n}`, type: 'memory', label: `Memory ${n}` }));
    const edges = Array.from({ length: 20_000 }, (_, n) => ({ source: 'm0', target: `m${n + 1}`, kind: 'knows' }));
    edges.push({ source: 'm1', target: 'm1', kind: 'self' });
    const prompt = [{ slot: 'long', label: 'Long-term', count: 50_000, memories: nodes.map((n) => ({ text: n.label })) }];
    const started = performance.now();
    const html = cardHtml(1, { injectionText: 'x', memories: [], subgraph: { nodes, edges }, prompt });
    const took = performance.now() - started;
    assert.equal(html.match(/class="lorekeeper-node"/g).length, SHOWN);
    // m0's first SHOWN links, and each other node drawn (m1 to m199) its own link to m0.
    assert.equal(html.match(/<li>knows → /g).length, SHOWN + SHOWN - 1);
    assert.equal(html.match(/<li>self → Memory 1<\/li>/g).length, 1, 'a node linked to itself is listed once');
    assert.equal(html.match(/<li><b>Long-term<\/b>/g).length, SHOWN);
    console.log(`drawn in ${took.toFixed(0)} ms`); // printed, not asserted
});

test("a stored recall is written only into the person's message it was asked for", () => {
    const record = { recallInput: 'Any ships tonight?', injectionText: '…' };
    assert.equal(recallFits({ is_user: true, mes: ' Any ships tonight? ' }, record), true);
    assert.equal(recallFits({ is_user: true, mes: 'Any ships tonight?\0' }, record), true); // NUL, as the server drops it
    // A deletion not yet sent shifts the indices: another message stands at the recall's.
    assert.equal(recallFits({ is_user: true, mes: 'Which one?' }, record), false);
    assert.equal(recallFits({ is_user: false, mes: 'Any ships tonight?' }, record), false);
    assert.equal(recallFits({ is_user: true, is_system: true, mes: 'Any ships tonight?' }, record), false);
    assert.equal(recallFits(undefined, record), false);
    assert.equal(recallFits({ is_user: true, mes: 'Anything' }, { injectionText: 'old record' }), true);
});
