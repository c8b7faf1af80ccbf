// Recall cards: under each user message that holds `extra.bme_recall`, what Lorekeeper recalled for that turn.
// A card expands to the injected text, the memories and the subgraph they form (a node's details on click), and
// can be edited, deleted and re-run through the recall API (each with the chat's integrity as If-Match).

/**
 * @typedef {object} CardActions
 * @property {(index: number, text: string) => Promise<void>} edit
 * @property {(index: number) => Promise<void>} remove
 * @property {(index: number) => Promise<void>} rerun
 * @property {(url: string) => string} [memoryUrl] a link to a memory in Lorekeeper's web UI
 */

/** @param {string} text */
function escapeHtml(text) {
    return String(text ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

/**
 * Whether the recall Lorekeeper stored for the turn at `message`'s index is that message's: a person's message,
 * shown to the model, saying what the recall was asked for (`recallInput`, the message as sent). When a send
 * failed and SillyTavern's chat holds a change Lorekeeper has not (a deletion waiting), the index can name another
 * message: the record is then not written into it.
 * @param {any} message SillyTavern's message at the recall's index
 * @param {any} record the recall record (`bme_recall`)
 */
export function recallFits(message, record) {
    if (!message || message.is_user !== true || message.is_system === true) return false;
    if (typeof record?.recallInput !== 'string') return true; // a record without it: nothing to tell it by
    const said = (/** @type {unknown} */ text) => String(text ?? '').replace(/\0/g, '').trim();
    return said(message.mes) === said(record.recallInput);
}

// Nodes, links of a node, and memories of the prompt a card lists at most: a record is kept in the chat and drawn
// each time it opens, and one imported from elsewhere can hold any number.
export const SHOWN = 200;

/**
 * Each node's edges, in the edges' order, found in one pass over them (not a pass a node).
 * @param {any[]} nodes
 * @param {any[]} edges
 * @returns {Map<any, any[]>}
 */
function edgesByNode(nodes, edges) {
    const found = new Map(nodes.map((node) => [node.id, []]));
    for (const edge of edges) {
        for (const end of edge?.source === edge?.target ? [edge?.source] : [edge?.source, edge?.target]) {
            const list = found.get(end);
            if (list && list.length < SHOWN) list.push(edge);
        }
    }
    return found;
}

/**
 * The subgraph as a list of nodes, each with its edges; clicking a node shows its details.
 * @param {{nodes?: any[], edges?: any[]}} subgraph
 */
function subgraphHtml(subgraph) {
    const nodes = (Array.isArray(subgraph?.nodes) ? subgraph.nodes : []).filter((n) => n && typeof n === 'object').slice(0, SHOWN);
    const edges = Array.isArray(subgraph?.edges) ? subgraph.edges : [];
    if (!nodes.length) return '<div class="lorekeeper-empty">No subgraph.</div>';
    const labels = new Map(nodes.map((n) => [n.id, n.label ?? n.id]));
    const linked = edgesByNode(nodes, edges);
    const items = nodes.map((node) => {
        const links = (linked.get(node.id) ?? []).map(
            (e) => `${escapeHtml(e.kind)} → ${escapeHtml(labels.get(e.source === node.id ? e.target : e.source) ?? '')}`,
        );
        const details = [
            `<div><b>${escapeHtml(node.type)}</b> · ${escapeHtml(node.kind ?? '')}${node.score != null ? ` · score ${Number(node.score).toFixed(3)}` : ''}</div>`,
            `<div>${escapeHtml(node.label)}</div>`,
            links.length ? `<ul>${links.map((l) => `<li>${l}</li>`).join('')}</ul>` : '',
        ].join('');
        return `<li class="lorekeeper-node" data-node="${escapeHtml(node.id)}" data-type="${escapeHtml(node.type)}">
            <span class="lorekeeper-node-label">${escapeHtml(node.label)}</span>
            <div class="lorekeeper-node-details" hidden>${details}</div></li>`;
    });
    return `<ul class="lorekeeper-subgraph">${items.join('')}</ul>`;
}

/** @param {number} n */
const memoriesWord = (n) => `${n} memor${n === 1 ? 'y' : 'ies'}`;

/**
 * The slots other than the turn's own recall through which memories reached the prompt, as the context build
 * wrote them into the record (`prompt`): "Long-term: 1 memory". Older records have none.
 * @param {any} record
 * @returns {string[]}
 */
export function otherSlots(record) {
    const entries = Array.isArray(record?.prompt) ? record.prompt : [];
    return entries
        .filter((e) => e && e.slot !== 'triggered' && Number(e.count) > 0)
        .map((e) => `${e.label ?? e.slot}: ${memoriesWord(Number(e.count))}`);
}

/** @param {any} record */
function promptListHtml(record) {
    const entries = Array.isArray(record?.prompt) ? record.prompt : [];
    const items = entries
        .flatMap((e) => (Array.isArray(e?.memories) ? e.memories.slice(0, SHOWN).map((m) => [e, m]) : []))
        .slice(0, SHOWN)
        .map(([e, m]) => `<li><b>${escapeHtml(e.label ?? e.slot)}</b> ${escapeHtml(m?.text ?? m?.kind ?? '')}</li>`);
    return items.length ? `<ul class="lorekeeper-recall-prompt">${items.join('')}</ul>` : '';
}

// What the card's editor changes: the turn's recalled text only (the other slots are Lorekeeper's memory pages').
const EDIT_HINT = 'The text recalled for this turn, as the model is given it: the memories of the other slots are not changed here';

/**
 * The summary's words for the turn's own recall: "0 memories" read as a failure beside slots that gave the prompt ten.
 * @param {number} count
 * @param {number} tokens
 * @param {boolean} others whether other slots were named before it
 */
function recalledWords(count, tokens, others) {
    if (count) return `Lorekeeper recalled ${memoriesWord(count)} (~${tokens} tokens)`;
    return others ? 'nothing more recalled for this turn' : 'Lorekeeper recalled nothing for this turn';
}

/**
 * @param {number} index
 * @param {any} record
 */
export function cardHtml(index, record) {
    const memories = Array.isArray(record.memories) ? record.memories : [];
    const edited = record.manuallyEdited ? ' · edited' : '';
    const others = otherSlots(record).map((part) => `${escapeHtml(part)} · `).join('');
    const text = record.injectionText
        ? escapeHtml(record.injectionText)
        : `Nothing was recalled for this message${others ? '; the prompt held the memories below' : ''}.`;
    return `<details class="lorekeeper-recall" data-index="${index}">
        <summary>${others}${recalledWords(memories.length, Number(record.tokenEstimate) || 0, Boolean(others))}${edited}</summary>
        <div class="lorekeeper-recall-body">
            <pre class="lorekeeper-recall-text">${text}</pre>
            ${promptListHtml(record)}
            <div class="lorekeeper-recall-editor" hidden>
                <textarea class="text_pole lorekeeper-recall-input" rows="6" aria-label="${EDIT_HINT}" placeholder="${EDIT_HINT}">${escapeHtml(record.injectionText)}</textarea>
                <div class="menu_button lorekeeper-recall-save">Save</div>
                <div class="menu_button lorekeeper-recall-cancel">Cancel</div>
            </div>
            <details class="lorekeeper-recall-graph"><summary>Subgraph</summary>${subgraphHtml(record.subgraph)}</details>
            <div class="lorekeeper-recall-actions">
                <div class="menu_button lorekeeper-recall-edit" title="Edit what is injected for this turn">Edit</div>
                <div class="menu_button lorekeeper-recall-rerun" title="Search again for this message">Re-run</div>
                <div class="menu_button lorekeeper-recall-delete" title="Remove this recall">Delete</div>
            </div>
            <div class="lorekeeper-recall-error" hidden></div>
        </div>
    </details>`;
}

/**
 * Draw (or redraw) the cards of the messages on screen.
 * @param {any[]} chat SillyTavern's live chat
 * @param {Document} doc
 * @param {CardActions} actions
 */
export function renderRecallCards(chat, doc, actions) {
    for (const element of doc.querySelectorAll('#chat .mes[mesid]')) {
        const index = Number(element.getAttribute('mesid'));
        const message = chat[index];
        const record = message?.is_user ? message?.extra?.bme_recall : null;
        const existing = element.querySelector('.lorekeeper-recall');
        const stamp = record ? `${record.updatedAt ?? ''}|${record.injectionText ?? ''}|${JSON.stringify(record.prompt ?? null)}` : '';
        if (existing && existing.getAttribute('data-stamp') === stamp && record) continue;
        const wasOpen = existing?.hasAttribute('open');
        existing?.remove();
        if (!record || typeof record.injectionText !== 'string') continue;
        const host = element.querySelector('.mes_block') ?? element;
        host.insertAdjacentHTML('beforeend', cardHtml(index, record));
        const card = /** @type {HTMLElement} */ (host.querySelector('.lorekeeper-recall'));
        card.setAttribute('data-stamp', stamp);
        if (wasOpen) card.setAttribute('open', '');
        wire(card, index, actions);
    }
}

/**
 * @param {HTMLElement} card
 * @param {number} index
 * @param {CardActions} actions
 */
function wire(card, index, actions) {
    // Deleting an earlier message renumbers the messages on screen without drawing them again: the message a
    // button acts on is read when it is pressed.
    const at = () => Number(card.closest('.mes')?.getAttribute('mesid') ?? index);
    const $ = (/** @type {string} */ selector) => /** @type {HTMLElement} */ (card.querySelector(selector));
    const error = $('.lorekeeper-recall-error');
    /** @param {() => Promise<void>} action */
    const run = async (action) => {
        error.hidden = true;
        card.classList.add('lorekeeper-busy');
        try {
            await action();
        } catch (e) {
            error.textContent = e instanceof Error ? e.message : String(e);
            error.hidden = false;
        } finally {
            card.classList.remove('lorekeeper-busy');
        }
    };
    $('.lorekeeper-recall-edit').addEventListener('click', () => {
        $('.lorekeeper-recall-editor').hidden = false;
        $('.lorekeeper-recall-text').hidden = true;
    });
    $('.lorekeeper-recall-cancel').addEventListener('click', () => {
        $('.lorekeeper-recall-editor').hidden = true;
        $('.lorekeeper-recall-text').hidden = false;
    });
    $('.lorekeeper-recall-save').addEventListener('click', () =>
        run(() => actions.edit(at(), /** @type {HTMLTextAreaElement} */ ($('.lorekeeper-recall-input')).value)),
    );
    $('.lorekeeper-recall-delete').addEventListener('click', () => run(() => actions.remove(at())));
    $('.lorekeeper-recall-rerun').addEventListener('click', () => run(() => actions.rerun(at())));
    for (const node of card.querySelectorAll('.lorekeeper-node-label')) {
        node.addEventListener('click', () => {
            const details = /** @type {HTMLElement} */ (node.parentElement?.querySelector('.lorekeeper-node-details'));
            details.hidden = !details.hidden;
        });
    }
    // The card lives inside the message: clicks on it must not start SillyTavern's message editing.
    card.addEventListener('click', (event) => event.stopPropagation());
}
