// Whether a checkpoint can be hot-swapped onto what a model serves: same architecture and same
// quantization, judged from config.json and the safetensors headers alone. Pure.

export interface CheckpointManifest {
  readonly architectures: readonly string[];
  readonly model_type: string;
  readonly quantization_config: Readonly<Record<string, unknown>> | null;
  /** Every tensor of every shard: name → stored dtype and shape. */
  readonly tensors: Readonly<Record<string, { readonly dtype: string; readonly shape: readonly number[] }>>;
}

const QUANT_SUFFIXES = ['.weight_scale', '.scales', '.qzeros', '.g_idx', '.weight_zero_point'];

/** The tensors as the architecture sees them: a quantized `x.qweight` is the layer's `x.weight`. */
function architectureTensors(manifest: CheckpointManifest): Map<string, string> {
  const tensors = new Map<string, string>();
  for (const [name, { shape }] of Object.entries(manifest.tensors)) {
    if (QUANT_SUFFIXES.some((suffix) => name.endsWith(suffix))) continue;
    tensors.set(name.replace(/\.qweight$/, '.weight'), `[${shape.join(', ')}]`);
  }
  return tensors;
}

const stable = (value: unknown) => JSON.stringify(value, (_key, inner) => (inner && typeof inner === 'object' && !Array.isArray(inner) ? Object.fromEntries(Object.entries(inner).sort()) : inner));

/** What differs, in words; empty when the candidate can replace the served weights in place. */
export function hotSwapDifferences(serving: CheckpointManifest, candidate: CheckpointManifest): { architecture: string[]; quantization: string[] } {
  const architecture: string[] = [];
  if (stable(serving.architectures) !== stable(candidate.architectures)) {
    architecture.push(`architectures ${stable(candidate.architectures)} instead of ${stable(serving.architectures)}`);
  }
  if (serving.model_type !== candidate.model_type) architecture.push(`model_type ${candidate.model_type} instead of ${serving.model_type}`);
  const served = architectureTensors(serving);
  const offered = architectureTensors(candidate);
  const missing = [...served.keys()].filter((name) => !offered.has(name));
  const extra = [...offered.keys()].filter((name) => !served.has(name));
  if (missing.length > 0) architecture.push(`${missing.length} tensor(s) missing, e.g. ${missing.slice(0, 3).join(', ')}`);
  if (extra.length > 0) architecture.push(`${extra.length} unexpected tensor(s), e.g. ${extra.slice(0, 3).join(', ')}`);
  const reshaped = [...served].filter(([name, shape]) => offered.has(name) && offered.get(name) !== shape);
  if (reshaped.length > 0) {
    architecture.push(`${reshaped.length} tensor(s) of another shape, e.g. ${reshaped.slice(0, 3).map(([name, shape]) => `${name} ${offered.get(name)} instead of ${shape}`).join(', ')}`);
  }

  const quantization: string[] = [];
  if (stable(serving.quantization_config) !== stable(candidate.quantization_config)) {
    quantization.push(`quantization_config ${stable(candidate.quantization_config)} instead of ${stable(serving.quantization_config)}`);
  }
  const servedNames = new Set(Object.keys(serving.tensors));
  const quantTensors = (names: Iterable<string>) => [...names].filter((name) => name.endsWith('.qweight') || QUANT_SUFFIXES.some((suffix) => name.endsWith(suffix)));
  const quantOnlyInCandidate = quantTensors(Object.keys(candidate.tensors)).filter((name) => !servedNames.has(name));
  const quantOnlyServed = quantTensors(servedNames).filter((name) => !(name in candidate.tensors));
  if (quantOnlyInCandidate.length > 0) quantization.push(`quantization tensors the served weights lack, e.g. ${quantOnlyInCandidate.slice(0, 3).join(', ')}`);
  if (quantOnlyServed.length > 0) quantization.push(`quantization tensors missing, e.g. ${quantOnlyServed.slice(0, 3).join(', ')}`);
  const retyped = Object.entries(candidate.tensors).filter(([name, tensor]) => serving.tensors[name] && serving.tensors[name]!.dtype !== tensor.dtype);
  if (retyped.length > 0) {
    quantization.push(`${retyped.length} tensor(s) of another dtype, e.g. ${retyped.slice(0, 3).map(([name, tensor]) => `${name} ${tensor.dtype} instead of ${serving.tensors[name]!.dtype}`).join(', ')}`);
  }
  return { architecture, quantization };
}

/** The rejection message: what differs, and that it needs a new deployment. */
export function rejectionReasons(differences: { architecture: string[]; quantization: string[] }): string[] {
  return [
    ...differences.architecture.map((text) => `architecture differs: ${text}`),
    ...differences.quantization.map((text) => `quantization differs: ${text}`),
  ].map((text) => `${text}; a checkpoint like this cannot be hot-swapped and needs a new deployment`);
}
