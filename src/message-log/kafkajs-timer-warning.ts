/** Where kafkajs's own sources sit in a stack trace. */
const KAFKAJS_FRAME = /[\\/]kafkajs[\\/]src[\\/]/;

let installed: (() => void) | undefined;

/**
 * kafkajs 2.2.4 schedules its request queue's throttle check `throttledUntil - Date.now()` ms
 * ahead, a large negative number when the broker never throttled it (tulios/kafkajs#1751). Node
 * runs such a timer after 1 ms, which is what kafkajs wants, but since Node 24 it also prints a
 * TimeoutNegativeWarning with a stack trace when a Kafka-connected process first connects, which
 * an operator would take for a fault. Drops that warning when kafkajs's code set the timer (Node
 * warns of a negative timeout once per process, so a later one elsewhere stays unreported, as it
 * would have been anyway); every other warning is emitted as before. Installed once per process;
 * returns a function that removes it.
 */
export function quietKafkajsNegativeTimeouts(): () => void {
  if (installed) return installed;
  const emitWarning = process.emitWarning;
  const filtered = function (this: NodeJS.Process, warning: string | Error, ...rest: unknown[]): void {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    // The stack is taken only for this one kind of warning, which is rare outside kafkajs.
    if (type === 'TimeoutNegativeWarning' && KAFKAJS_FRAME.test(new Error().stack ?? '')) return;
    (emitWarning as (...args: unknown[]) => void).call(this, warning, ...rest);
  };
  process.emitWarning = filtered as typeof process.emitWarning;
  installed = () => {
    if (process.emitWarning === filtered) process.emitWarning = emitWarning;
    installed = undefined;
  };
  return installed;
}
