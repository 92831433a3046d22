/** Collects WHERE clauses and their $n parameters together, so placeholders always line up. */
export class Conditions {
  readonly params: unknown[] = [];
  private readonly clauses: string[] = [];

  param(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  add(clause: string): void {
    this.clauses.push(clause);
  }

  get sql(): string {
    return this.clauses.length ? this.clauses.join(' AND ') : 'TRUE';
  }
}
