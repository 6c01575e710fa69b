import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folder holding package.json: the same whether running from src/ (tests) or dist/src/. */
export const packageRoot: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('spool: cannot find package.json above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
  return dir;
})();

export const schemasDir = join(packageRoot, 'schemas');
