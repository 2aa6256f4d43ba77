import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { instanceSecret } from '../../store/repos/instance-secrets.ts';
import type { Store } from '../../store/store.ts';

/**
 * Endpoint secrets, sealed as the app seals its other secrets: AES-256-GCM under a deployment-wide
 * key (instance_secrets), the endpoint's id bound in as authenticated data, so a sealed secret
 * copied to another endpoint's row does not open. The signer needs the secret itself, so it is
 * sealed rather than hashed.
 */
export class SecretBox {
  private key: Promise<Buffer> | null = null;
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  async seal(endpointId: string, secret: string): Promise<string> {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', await this.sealingKey(), iv);
    cipher.setAAD(Buffer.from(endpointId));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
  }

  async open(endpointId: string, sealed: string): Promise<string> {
    const raw = Buffer.from(sealed, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', await this.sealingKey(), raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(endpointId));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }

  private sealingKey(): Promise<Buffer> {
    this.key ??= instanceSecret(this.store.db, 'webhooks.sealing-key').catch((error: unknown) => {
      this.key = null;
      throw error;
    });
    return this.key;
  }
}
