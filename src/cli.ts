#!/usr/bin/env node
// The entry point loads nothing else first: a long-running command may start over under limits on
// malloc arenas and V8's young generation (process-limits.ts), and loading the service's modules
// takes about half a second.
import { startUnderProcessLimits } from './process-limits.js';

startUnderProcessLimits();
await import('./cli-commands.js');
