import type { FastifyInstance } from 'fastify';
import { isProblemCode, PROBLEMS, ProblemError } from './problem.js';
import { withSchemaTypes } from './schemas.js';

const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (char) => `&#${char.charCodeAt(0)};`);

/** The `type` of every problem resolves to its entry of the registry: JSON, or a short page for a browser. */
export function problemPages(app: FastifyInstance): void {
  withSchemaTypes(app).get(
    '/problems/:code',
    {
      // A page for a browser (below): the document policy.
      config: { headerPolicy: {} },
      schema: {
        tags: ['operations'],
        operationId: 'getProblem',
        summary: "What a problem type means: the target of every error body's `type` (JSON, or a short page for a browser)",
        params: { type: 'object', required: ['code'], properties: { code: { type: 'string', maxLength: 64 } } },
        response: {
          200: {
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  properties: {
                    type: { type: 'string' },
                    code: { type: 'string' },
                    status: { type: 'integer' },
                    title: { type: 'string' },
                    description: { type: 'string' },
                  },
                },
              },
              'text/html': { schema: { type: 'string' } },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      if (!isProblemCode(code)) throw new ProblemError('not_found', `No problem type "${code}"`);
      const { status, title, description } = PROBLEMS[code];
      const page = { type: `/problems/${code}`, code, status, title, description };
      // A browser following the `type` link asks for HTML; anything else gets JSON.
      if (!/\btext\/html\b/.test(request.headers.accept ?? '')) return page;
      return reply
        .type('text/html; charset=utf-8')
        .send(
          `<!doctype html><meta charset="utf-8"><title>${escapeHtml(title)}</title><h1>${status} ${escapeHtml(title)}</h1><p><code>${code}</code></p><p>${escapeHtml(description)}</p><p><a href="/docs">API reference</a></p>\n`,
        );
    },
  );
}
