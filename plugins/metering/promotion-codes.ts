import { randomBytes, randomUUID } from 'node:crypto';
import { hashToken } from '../../core/identity/api-tokens.ts';
import type { Queryable } from '../../core/ports/database.ts';
import { bigintOf, date, dateOrNull, str, type Row } from '../../adapters/sql/rows.ts';

/**
 * Promotion codes: credit the operator hands out (npm run cli -- credits codes create). A code is
 * 16 characters of Crockford's base32 (80 random bits), shown once in groups of four; only its hash
 * is stored. Each organisation redeems a code once; a code may also limit its redemptions in total.
 */

/** Crockford's base32: no I, L, O or U, so a code read aloud or retyped is not misread. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 16;

export function generatePromotionCode(): string {
  // 32 divides 256: the low five bits of a random byte are uniform.
  const characters = [...randomBytes(CODE_LENGTH)].map((byte) => ALPHABET[byte & 31]).join('');
  return characters.match(/.{4}/g)!.join('-');
}

/**
 * A code as typed, in its canonical form: case, spaces and dashes do not matter, and the letters
 * Crockford's alphabet leaves out read as the digits they resemble (O as 0, I and L as 1).
 */
export function normalisePromotionCode(typed: string): string {
  return typed
    .toUpperCase()
    .replace(/[\s-]+/g, '')
    .replace(/O/g, '0')
    .replace(/[IL]/g, '1');
}

/** What the store keeps and looks codes up by: 80 random bits need no slow hash. */
export function promotionCodeHash(typed: string): string {
  return hashToken(`promotion:${normalisePromotionCode(typed)}`);
}

/** The last four characters, to tell codes apart in the operator's list. */
export function promotionCodeHint(code: string): string {
  return normalisePromotionCode(code).slice(-4);
}

export interface PromotionCode {
  id: string;
  hint: string;
  /** What the ledger line says (the code itself never appears there). */
  label: string;
  amountMicros: bigint;
  expiresAt: Date;
  /** null: no limit but once per organisation. */
  maxRedemptions: number | null;
  redemptions: number;
  createdAt: Date;
  revokedAt: Date | null;
}

/** Why a redemption was refused inside its transaction. */
export type ClaimRefusal = 'already_redeemed' | 'used_up' | 'expired' | 'revoked';

const toCode = (row: Row): PromotionCode => ({
  id: str(row, 'id'),
  hint: str(row, 'hint'),
  label: str(row, 'label'),
  amountMicros: bigintOf(row, 'amount_micros'),
  expiresAt: date(row, 'expires_at'),
  maxRedemptions: row['max_redemptions'] === null || row['max_redemptions'] === undefined ? null : Number(row['max_redemptions']),
  redemptions: Number(row['redemptions']),
  createdAt: date(row, 'created_at'),
  revokedAt: dateOrNull(row, 'revoked_at'),
});

/** Promotion codes and their redemptions in SQL, over a connection or the redemption's transaction. */
export class SqlPromotionCodes {
  constructor(private readonly db: Queryable) {}

  async create(input: { code: string; label: string; amountMicros: bigint; expiresAt: Date; maxRedemptions: number | null }): Promise<PromotionCode> {
    const { rows } = await this.db.query(
      `INSERT INTO promotion_codes (id, code_hash, hint, label, amount_micros, expires_at, max_redemptions)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [randomUUID(), promotionCodeHash(input.code), promotionCodeHint(input.code), input.label, input.amountMicros, input.expiresAt, input.maxRedemptions],
    );
    return toCode(rows[0]!);
  }

  /** Newest first. */
  async list(): Promise<PromotionCode[]> {
    const { rows } = await this.db.query('SELECT * FROM promotion_codes ORDER BY created_at DESC, id DESC');
    return rows.map(toCode);
  }

  /** Withdraws a code: later redemptions are refused, earlier ones stand. Null when there is no such code. */
  async revoke(id: string, now: Date): Promise<PromotionCode | null> {
    const { rows } = await this.db.query('UPDATE promotion_codes SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING *', [id, now]);
    return rows[0] ? toCode(rows[0]) : null;
  }

  /** The code a typed text names, and whether the organisation has redeemed it. */
  async find(typed: string, organizationId: string): Promise<{ code: PromotionCode; redeemed: boolean } | null> {
    const { rows } = await this.db.query(
      `SELECT c.*, EXISTS (SELECT 1 FROM promotion_redemptions r WHERE r.code_id = c.id AND r.organization_id = $2) AS redeemed
       FROM promotion_codes c WHERE c.code_hash = $1`,
      [promotionCodeHash(typed), organizationId],
    );
    const row = rows[0];
    return row ? { code: toCode(row), redeemed: row['redeemed'] === true } : null;
  }

  /**
   * Takes one redemption of the code for the organisation, in the redemption's transaction; a
   * refusal's reason otherwise, having written nothing. The redemption row's
   * key makes a second one of the same organisation wait for the first and then find it; the
   * conditional count makes two organisations racing for the last one serialise on the code row,
   * and the second find nothing left.
   */
  async claim(codeId: string, organizationId: string, now: Date): Promise<ClaimRefusal | null> {
    const inserted = await this.db.query('INSERT INTO promotion_redemptions (code_id, organization_id, redeemed_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING code_id', [
      codeId,
      organizationId,
      now,
    ]);
    if (inserted.rowCount === 0) return 'already_redeemed';
    const counted = await this.db.query(
      `UPDATE promotion_codes SET redemptions = redemptions + 1
       WHERE id = $1 AND revoked_at IS NULL AND expires_at > $2 AND (max_redemptions IS NULL OR redemptions < max_redemptions)
       RETURNING id`,
      [codeId, now],
    );
    if (counted.rowCount > 0) return null;
    // A refusal leaves nothing behind, whether or not the caller rolls back.
    await this.db.query('DELETE FROM promotion_redemptions WHERE code_id = $1 AND organization_id = $2', [codeId, organizationId]);
    const { rows } = await this.db.query('SELECT * FROM promotion_codes WHERE id = $1', [codeId]);
    const code = toCode(rows[0]!);
    if (code.revokedAt) return 'revoked';
    if (code.expiresAt <= now) return 'expired';
    return 'used_up';
  }

  /** Names the ledger line a redemption wrote (in the same transaction). */
  async recordLine(codeId: string, organizationId: string, ledgerLineId: string): Promise<void> {
    await this.db.query('UPDATE promotion_redemptions SET ledger_line_id = $3 WHERE code_id = $1 AND organization_id = $2', [codeId, organizationId, ledgerLineId]);
  }
}
