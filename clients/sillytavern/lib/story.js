// Words for the panel's "This story" section, from Lorekeeper's pipeline answer (GET chats/<id>/pipeline).

/**
 * What waits for the person's decision: a chat's history is extracted only once they press Run in Lorekeeper
 * (state `awaiting_consent`, with the estimate of what Run spends). Empty when nothing waits.
 * @param {any} pipeline
 */
export function consentNotice(pipeline) {
    if (pipeline?.state !== 'awaiting_consent') return '';
    const estimate = pipeline.estimate;
    if (!estimate) return 'Memories wait for you to press Run in Lorekeeper.';
    const count = (/** @type {number} */ n) => Number(n).toLocaleString('en');
    const messages = `${count(estimate.messages)} message${Number(estimate.messages) === 1 ? '' : 's'}`;
    return `${messages} wait for Run in Lorekeeper before memories are made from them: about ${count(estimate.calls)} model calls and ${count(estimate.prompt_tokens)} prompt tokens.`;
}
