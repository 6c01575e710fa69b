/**
 * Who is asking. With accounts off (the spec's default: `/v1` takes no credential) every caller
 * is the open principal, which owns nothing and sees every object. With ACCOUNTS=required a `/v1`
 * caller is the account its key speaks for, and sees only what that account owns.
 */
export type Principal = { readonly kind: 'open' } | { readonly kind: 'account'; readonly accountId: string; readonly keyId: string };

export const OPEN_PRINCIPAL: Principal = { kind: 'open' };

/** The account whose objects the principal may see and makes: undefined for the open principal (every object, owned by none). */
export function ownerOf(principal: Principal): string | undefined {
  return principal.kind === 'account' ? principal.accountId : undefined;
}

/** Whether an object owned by `owner` (null: made while accounts were off) is the principal's to see. */
export function maySee(principal: Principal, owner: string | null | undefined): boolean {
  return principal.kind === 'open' || owner === principal.accountId;
}
