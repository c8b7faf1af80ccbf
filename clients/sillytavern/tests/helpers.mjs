// Shared by the Node tests: a seeded PRNG, SillyTavern-shaped messages, and the random edits a user makes to a chat.

/** mulberry32: a tiny seeded PRNG (floats in [0, 1)). @param {number} seed */
export function mulberry32(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

export class Rand {
    /** @param {number} seed */
    constructor(seed) {
        this.next = mulberry32(seed);
    }

    /** An integer in [0, n). @param {number} n */
    int(n) {
        return Math.floor(this.next() * n);
    }

    /** @param {number} p */
    chance(p) {
        return this.next() < p;
    }

    /** @template T @param {T[]} items @returns {T} */
    pick(items) {
        return items[this.int(items.length)];
    }
}

const WORDS = (
    'the a lantern river quiet stone ember whisper north tower glass silver hollow market thread ' +
    'winter orchard harbor compass velvet ash cinder meadow forge lark'
).split(' ');

export const copy = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/**
 * Makes messages that carry a unique marker «<prefix><n>» at the start of `mes` (kept by every edit and swipe), so a
 * test can count where each one went.
 */
export class ChatGen {
    /** @param {Rand} rand @param {string} [prefix] */
    constructor(rand, prefix = 'm') {
        this.rand = rand;
        this.prefix = prefix;
        this.count = 0;
        this.clock = Date.UTC(2025, 0, 1);
    }

    date() {
        this.clock += 1000 * (1 + this.rand.int(600));
        return new Date(this.clock).toISOString();
    }

    /** About `length` characters of words. @param {number} length */
    text(length) {
        let out = '';
        while (out.length < length) out += (out ? ' ' : '') + this.rand.pick(WORDS);
        return out;
    }

    marker() {
        return `«${this.prefix}${++this.count}»`;
    }

    user(textLength = 100) {
        return { name: 'User', is_user: true, is_system: false, send_date: this.date(), mes: `${this.marker()} ${this.text(textLength)}`, extra: {} };
    }

    /** An assistant message with swipes, swipe_info and extra, as SillyTavern writes one. */
    assistant(textLength = 45) {
        const date = this.date();
        const mes = `${this.marker()} ${this.text(textLength)}`;
        return {
            name: 'Aria',
            is_user: false,
            is_system: false,
            send_date: date,
            mes,
            extra: { api: 'openai', model: 'gpt-4o', token_count: 10 + this.rand.int(90) },
            swipe_id: 0,
            swipes: [mes],
            swipe_info: [{ send_date: date, gen_started: date, gen_finished: date, extra: { api: 'openai', model: 'gpt-4o' } }],
        };
    }

    /** A live chat: `count` messages, user and assistant in turn, some hidden, some swiped, and chat_metadata. */
    chat(count) {
        const messages = [];
        for (let i = 0; i < count; i++) {
            const message = i % 2 === 0 ? this.user() : this.assistant();
            if (this.rand.chance(0.05)) message.is_system = true;
            messages.push(message);
        }
        const metadata = { integrity: 'st-file-integrity', chat_id_hash: 12345, note_prompt: '', variables: { mood: 'calm', turns: count } };
        if (this.rand.chance(0.5)) metadata.tags = ['a', 'b'];
        return { messages, metadata };
    }
}

/** The marker at the start of a message's `mes`. @param {any} message */
export function markerOf(message) {
    const match = typeof message?.mes === 'string' ? /^«([^»]+)»/.exec(message.mes) : null;
    return match ? match[1] : null;
}

/** How many messages carry each marker. @param {any[]} messages */
export function markerCounts(messages) {
    /** @type {Map<string, number>} */
    const counts = new Map();
    for (const m of messages) {
        const marker = markerOf(m);
        if (marker) counts.set(marker, (counts.get(marker) ?? 0) + 1);
    }
    return counts;
}

const EXTRA_KEYS = ['display_text', 'reasoning', 'bias', 'constructor', 'a/b', 'x~y', 'toString', 'note'];
const META_KEYS = ['note_prompt', 'quickReply', 'constructor', 'odd/key', 'timedWorldInfo', 'scenario'];

function randomValue(rand, gen, depth = 0) {
    const kind = rand.int(depth > 1 ? 4 : 7);
    if (kind === 0) return rand.int(1000);
    if (kind === 1) return gen.text(8);
    if (kind === 2) return rand.chance(0.5);
    if (kind === 3) return null;
    if (kind === 4) return [randomValue(rand, gen, depth + 1), randomValue(rand, gen, depth + 1)];
    /** @type {Record<string, any>} */
    const obj = {};
    for (let i = rand.int(3); i >= 0; i--) obj[rand.pick(['k', 'depth', 'entries', 'x', 'constructor'])] = randomValue(rand, gen, depth + 1);
    return obj;
}

/** Keep a message's marker while changing its text. */
function newText(gen, message, what) {
    const marker = markerOf(message);
    return `${marker ? `«${marker}» ` : ''}${what} ${gen.text(40)}`;
}

/**
 * The edits a user (or SillyTavern) makes, applied in place to a chat state.
 * @type {Record<string, (state: {messages: any[], metadata: Record<string, any>}, rand: Rand, gen: ChatGen) => void>}
 */
export const MUTATIONS = {
    send(state, rand, gen) {
        state.messages.push(gen.user(40 + rand.int(200)));
    },
    reply(state, rand, gen) {
        state.messages.push(gen.assistant(40 + rand.int(120)));
    },
    swipe(state, rand, gen) {
        const candidates = state.messages.filter((m) => !m.is_user && Array.isArray(m.swipes));
        if (!candidates.length) return MUTATIONS.reply(state, rand, gen);
        const message = rand.pick(candidates);
        const mes = newText(gen, message, 'swipe');
        const date = gen.date();
        message.swipes.push(mes);
        message.swipe_info = Array.isArray(message.swipe_info) ? message.swipe_info : [];
        message.swipe_info.push({ send_date: date, gen_started: date, gen_finished: date, extra: { api: 'openai', model: 'gpt-4o' } });
        message.swipe_id = message.swipes.length - 1;
        message.mes = mes;
        message.send_date = date;
    },
    edit(state, rand, gen) {
        if (!state.messages.length) return MUTATIONS.send(state, rand, gen);
        const message = rand.pick(state.messages);
        const field = rand.int(9);
        if (field === 0) message.mes = newText(gen, message, 'edited');
        else if (field === 1) {
            message.extra = message.extra && typeof message.extra === 'object' ? message.extra : {};
            message.extra[rand.pick(EXTRA_KEYS)] = randomValue(rand, gen);
        } else if (field === 2) {
            if (message.extra && typeof message.extra === 'object') {
                const keys = Object.keys(message.extra);
                if (keys.length) delete message.extra[rand.pick(keys)];
            }
        } else if (field === 3) {
            // An extension's namespace inside extra, changed deep down.
            message.extra = message.extra && typeof message.extra === 'object' ? message.extra : {};
            const ns = (message.extra.bme ??= {});
            if (typeof ns !== 'object' || ns === null || Array.isArray(ns)) message.extra.bme = {};
            const target = message.extra.bme;
            target.recall = target.recall && typeof target.recall === 'object' ? target.recall : {};
            target.recall[rand.pick(['text', 'ids', 'score', 'constructor'])] = randomValue(rand, gen);
        } else if (field === 4) message.name = rand.pick(['User', 'Aria', 'Narrator', 'Bob']);
        else if (field === 5) {
            if ('force_avatar' in message) delete message.force_avatar;
            else message.force_avatar = `${gen.text(5)}.png`;
        } else if (field === 6) {
            const info = Array.isArray(message.swipe_info) ? message.swipe_info[message.swipe_id ?? 0] : null;
            if (info && typeof info === 'object') {
                info.extra = info.extra && typeof info.extra === 'object' ? info.extra : {};
                info.extra.bme_recall = { text: gen.text(20), deep: { n: rand.int(10) } };
            } else message.gen_started = gen.date();
        } else if (field === 7) message.send_date = gen.date();
        else message.extra = { ...(message.extra ?? {}), [rand.pick(EXTRA_KEYS)]: { nested: randomValue(rand, gen), gone: null } };
    },
    delete(state, rand) {
        if (state.messages.length) state.messages.splice(rand.int(state.messages.length), 1);
    },
    hide(state, rand) {
        if (!state.messages.length) return;
        const message = rand.pick(state.messages);
        message.is_system = !message.is_system;
    },
    move(state, rand) {
        if (state.messages.length < 2) return;
        const [message] = state.messages.splice(rand.int(state.messages.length), 1);
        state.messages.splice(rand.int(state.messages.length + 1), 0, message);
    },
    metadata(state, rand, gen) {
        const md = state.metadata;
        const kind = rand.int(8);
        if (kind === 0) md[rand.pick(META_KEYS)] = randomValue(rand, gen);
        else if (kind === 1) {
            const keys = Object.keys(md);
            if (keys.length) delete md[rand.pick(keys)];
        } else if (kind === 2) {
            md.variables = md.variables && typeof md.variables === 'object' && !Array.isArray(md.variables) ? md.variables : {};
            md.variables[rand.pick(['mood', 'turns', 'hp', 'constructor', 'a/b'])] = randomValue(rand, gen);
        } else if (kind === 3) {
            if (md.variables && typeof md.variables === 'object' && !Array.isArray(md.variables)) {
                const keys = Object.keys(md.variables);
                if (keys.length) delete md.variables[rand.pick(keys)];
            }
        } else if (kind === 4) md.tags = [gen.text(5), null, rand.int(9)];
        else if (kind === 5) md.deep = { level1: { level2: { value: randomValue(rand, gen), list: [1, null] } } };
        else if (kind === 6) {
            // A value with a null inside a changed object: a merge patch cannot say it.
            md.variables = md.variables && typeof md.variables === 'object' && !Array.isArray(md.variables) ? md.variables : {};
            md.variables.cleared = null;
        } else md.integrity = `st-${gen.text(4)}`;
    },
    duplicate(state, rand, gen) {
        // The same message sent twice in a row: deep-equal to the previous last one.
        if (!state.messages.length) return MUTATIONS.send(state, rand, gen);
        state.messages.push(copy(state.messages[state.messages.length - 1]));
    },
};

export const ALL_MUTATIONS = Object.keys(MUTATIONS);
export const APPEND_MUTATIONS = ['send', 'reply'];

/**
 * Apply 1..max random mutations to a copy of `state`. Answers the new state and the mutations' names.
 * @param {{messages: any[], metadata: Record<string, any>}} state
 * @param {Rand} rand
 * @param {ChatGen} gen
 * @param {{kinds?: string[], max?: number, min?: number}} [options]
 */
export function mutate(state, rand, gen, { kinds = ALL_MUTATIONS, max = 8, min = 1 } = {}) {
    const next = copy(state);
    const done = [];
    const count = min + rand.int(max - min + 1);
    for (let i = 0; i < count; i++) {
        const kind = rand.pick(kinds);
        MUTATIONS[kind](next, rand, gen);
        done.push(kind);
    }
    return { state: next, done };
}
