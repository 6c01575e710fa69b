// The Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature), as the
// openai client's webhooks.unwrap verifies it.
import { createHmac } from 'node:crypto';

/** HMAC-SHA256 over `${id}.${timestamp}.${body}` with the secret's base64 key, as `v1,<base64>`. */
export function webhookSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The headers of one signed delivery. */
export function signedHeaders(secret: string, id: string, timestampSeconds: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': webhookSignature(secret, id, timestampSeconds, body),
  };
}
