#!/usr/bin/env node
// The entry point loads nothing else first: a long-running command may start over under a limit
// on malloc arenas (malloc-arenas.ts), and loading the service's modules takes about half a second.
import { startOverWithArenaLimit } from './malloc-arenas.js';

startOverWithArenaLimit();
await import('./cli-commands.js');
