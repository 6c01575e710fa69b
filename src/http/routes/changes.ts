import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ChangeFeed } from '../../../projections/change-feed.js';
import type { OwnedObjects } from '../../../projections/owned-objects.js';
import { EventStreamResponse } from '../event-stream.js';
import type { HttpTimeouts } from '../http-settings.js';

export interface ChangeRouteDeps {
  readonly changeFeed: ChangeFeed;
  readonly owned: OwnedObjects;
  readonly timeouts: Pick<HttpTimeouts, 'eventStreamHeartbeatMs'>;
}

const STREAM_DOC = {
  openapi: {
    responses: {
      200: {
        description:
          'Server-sent events: `ready` once following, then `changed` with `{"subjects": ["batch:<id>", "file:<id>", …]}` naming what changed since the last message (at most five a second); a heartbeat comment every 15 s. Fetch the named objects to see how.',
        content: { 'text/event-stream': { schema: { type: 'string', description: 'event: changed\\ndata: {"subjects":[...]}\\n\\n, repeated' } } },
      },
    },
  },
};

/**
 * Word of what changed, live: the console (and any page or tool that shows Spool's objects) hears
 * which batches, files, weight syncs, jobs and webhooks to fetch again, instead of polling them.
 * `/v1/changes` names the asker's batches and files; `/mgmt/v1/changes` (bearer API_KEY) names
 * every subject.
 */
export function registerChangeRoutes(app: FastifyInstance, deps: ChangeRouteDeps): void {
  const open = new Set<EventStreamResponse>();
  app.addHook('preClose', async () => {
    for (const stream of open) stream.end();
  });

  const follow = async (request: FastifyRequest, reply: FastifyReply, visible: (subject: string) => boolean) => {
    // A HEAD asks for the headers only, not a stream held open.
    if (request.method !== 'GET') return reply.type('text/event-stream; charset=utf-8').send('');
    const stream = new EventStreamResponse(reply, deps.timeouts.eventStreamHeartbeatMs);
    open.add(stream);
    try {
      // A follower fetches what it shows once this arrives: nothing changed before it is missed.
      await stream.send([{ event: 'ready', data: {} }]);
      for await (const subjects of deps.changeFeed.follow(visible, stream.closed)) await stream.send([{ event: 'changed', data: { subjects } }]);
    } catch (error) {
      request.log.error({ err: error }, 'change stream stopped');
    } finally {
      open.delete(stream);
      stream.end();
    }
  };

  app.get(
    '/v1/changes',
    { schema: { summary: 'Which of your batches and files changed, live (server-sent events)', tags: ['audit'] }, config: STREAM_DOC },
    async (request, reply) =>
      follow(request, reply, (subject) => (subject.startsWith('batch:') || subject.startsWith('file:')) && deps.owned.knowsHistory(request.principal, subject)),
  );
  app.get(
    '/mgmt/v1/changes',
    { schema: { summary: 'Which batches, files, weight syncs, jobs, webhooks and accounts changed, live (server-sent events)', tags: ['audit'], security: [{ bearer: [] }] }, config: STREAM_DOC },
    async (request, reply) => follow(request, reply, () => true),
  );
}
