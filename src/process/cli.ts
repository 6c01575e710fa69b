#!/usr/bin/env node
// The entry point loads only what deciding a start-over takes (process-limits.ts, heap-policy.ts and
// node's builtins): a long-running command may start over under limits on malloc arenas and V8's
// young generation, and loading the service's modules takes about half a second.
import { startUnderProcessLimits } from './process-limits.js';

startUnderProcessLimits();
await import('./cli-commands.js');
