// An S3-compatible server (s3rver, as the tests use) in its own process for the benchmarks:
//   node dist/bench/s3-server.js DIRECTORY BUCKET      prints "listening on PORT" once it serves.
// It keeps objects as files under DIRECTORY.
interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: { address: string; port: number; silent: boolean; directory: string; configureBuckets: Array<{ name: string; configs: unknown[] }> }) => S3rverInstance;

const [directory, bucket = 'bench'] = process.argv.slice(2);
if (!directory) throw new Error('usage: s3-server.js DIRECTORY [BUCKET]');
const specifier: string = 's3rver';
const { default: S3rver } = (await import(specifier)) as { default: S3rverClass };
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
const { port } = await server.run();
process.stdout.write(`listening on ${port}\n`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
