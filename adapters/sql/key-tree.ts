/**
 * A key and every key it made, transitively, as the recursive query `key_tree(id)` (use after
 * `WITH RECURSIVE`); `idParam` is the placeholder of the root key's id. UNION, not UNION ALL, so
 * the walk ends even on rows that would point at each other.
 */
export const keyTree = (idParam: string): string => `key_tree(id) AS (SELECT ${idParam}::uuid UNION SELECT k.id FROM api_keys k JOIN key_tree t ON k.created_by_key_id = t.id)`;

/** How many makers up a key's chain the credential lookup follows; keys are not nested deeper in practice. */
export const MAX_KEY_CHAIN = 32;
