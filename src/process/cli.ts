#!/usr/bin/env node
// The entry point first checks the Node.js version: on one Spool does not support, loading the
// native SQLite module ends the process with a segmentation fault and no word. Then it loads only
// what deciding a start-over takes (process-limits.ts, heap-policy.ts and node's builtins): a
// long-running command may start over under limits on malloc arenas and V8's young generation,
// and loading the service's modules takes about half a second.
import { exitUnlessSupportedNode } from './node-version.js';

exitUnlessSupportedNode();
const { startUnderProcessLimits } = await import('./process-limits.js');
startUnderProcessLimits();
await import('./cli-commands.js');
