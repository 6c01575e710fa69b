import { type Config, ConfigError } from '../config.js';
import { PROCESSOR_KINDS, type ProcessorKind } from '../messages/topics.js';

/** What one process does: the HTTP API, the relay, or one processor kind (or several of them). */
export type Role = 'api' | 'relay' | ProcessorKind;
export const ALL_ROLES: readonly Role[] = ['api', 'relay', ...PROCESSOR_KINDS];

/**
 * The roles of this process. Default: everything on the embedded message log; only the API when
 * the message log is Kafka (relay and processors then run as their own processes).
 */
export function resolveRoles(config: Config, requested: readonly Role[] | undefined): ReadonlySet<Role> {
  const roles = new Set<Role>(requested ?? (config.kafka ? ['api'] : ALL_ROLES));
  if (!config.kafka && ALL_ROLES.some((role) => !roles.has(role))) {
    throw new ConfigError(['KAFKA_BROKERS must be set to run the API, the relay or a processor in a process of its own: the embedded message log lives inside one process']);
  }
  return roles;
}
