import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';

const uiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css',
  'swagger-ui-bundle.js': 'application/javascript',
  'favicon-32x32.png': 'image/png',
};

/** `/docs` (and `/v1/docs`, `/v2/docs`): Swagger UI over the version's openapi.json, served from the local package. */
export function registerDocs(app: FastifyInstance): void {
  const page = (specUrl: string) => `<!doctype html><html><head><meta charset="utf-8"><title>signalbase API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head><body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: ${JSON.stringify(specUrl)}, dom_id: '#ui', persistAuthorization: true });</script>
</body></html>`;
  app.get('/docs', (_req, reply) => reply.type('text/html').send(page('/v2/openapi.json')));
  for (const v of ['v1', 'v2']) app.get(`/${v}/docs`, (_req, reply) => reply.type('text/html').send(page(`/${v}/openapi.json`)));
  app.get<{ Params: { file: string } }>('/docs/assets/:file', async (req, reply) => {
    const type = ASSETS[req.params.file];
    if (!type) return reply.callNotFound();
    return reply.type(type).send(await readFile(join(uiDir, req.params.file)));
  });
}
