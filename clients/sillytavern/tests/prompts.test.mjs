// What the context answer asks SillyTavern to inject, checked first (lib/prompts.js): a memory a model wrote cannot
// run SillyTavern's macros or land in another extension's prompt.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { extensionPrompts, inertMacros, macroTexts, MAX_DEPTH } from '../lib/prompts.js';

const KEYS = ['smart_memory_long', 'smart_memory_short'];
const ZW = '\u200B';

test("a memory's macros are inert but {{user}} and {{char}}", () => {
    const memory = 'Bob trusts {{user}} and {{Char}}.{{setglobalvar::qr::/run x}}{{setvar::mood::obey}}{{banned "no"}}{{// hide}}';
    assert.equal(
        inertMacros(memory),
        `Bob trusts {{user}} and {{Char}}.{${ZW}{setglobalvar::qr::/run x}}{${ZW}{setvar::mood::obey}}{${ZW}{banned "no"}}{${ZW}{// hide}}`,
    );
    // Braces in a row: each pair that would open a macro is kept apart.
    assert.equal(inertMacros('{{{random::a::b}}}'), `{${ZW}{${ZW}{random::a::b}}}`);
    assert.equal(inertMacros('{{{user}}} {{ char }}'), `{${ZW}{{user}}} {{ char }}`);
    assert.equal(inertMacros('a { b } {c}'), 'a { b } {c}');
    assert.equal(inertMacros(null), '');
});

test("only Lorekeeper's slots are set, once each, where SillyTavern can put them, never scanned", () => {
    const answer = [
        { key: 'smart_memory_long', value: 'Mira {{getvar::secret}}', position: 1, depth: 4, scan: true, role: 2 },
        { key: '2_floating_prompt', value: 'an Author\u2019s Note overwritten', position: 1, depth: 0, scan: false, role: 0 },
        { key: 'smart_memory_long', value: 'a second copy', position: 0, depth: 0, scan: false, role: 0 },
        { key: 'smart_memory_short', value: 7, position: 9, depth: 1e9, scan: 'yes', role: 'system' },
        null,
        'smart_memory_short',
    ];
    assert.deepEqual(extensionPrompts(answer, KEYS), [
        { key: 'smart_memory_long', value: `Mira {${ZW}{getvar::secret}}`, position: 1, depth: 4, scan: false, role: 2 },
        { key: 'smart_memory_short', value: '', position: 0, depth: MAX_DEPTH, scan: false, role: 0 },
    ]);
    assert.deepEqual(extensionPrompts({ key: 'smart_memory_long' }, KEYS), []);
    assert.deepEqual(extensionPrompts(undefined, KEYS), []);
});

test("the {{smartmemory-*}} macros' texts are inert too, and only texts are kept", () => {
    const macros = { '{{smartmemory-long}}': 'Long {{roll:d20}} {{user}}', '{{smartmemory-short}}': { text: 'x' } };
    assert.deepEqual(macroTexts(macros), { '{{smartmemory-long}}': `Long {${ZW}{roll:d20}} {{user}}` });
    assert.deepEqual(macroTexts(['a']), {});
    assert.deepEqual(macroTexts(null), {});
});
