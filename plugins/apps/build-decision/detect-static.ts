import { type Detector, chosen } from './detection.ts';

/**
 * A static site: index.html at the folder's top, and no other provider's manifest. It needs no
 * interpreter and runs no command: the hosting runtime's static file server serves the files as
 * they are, which `start.rule` says; `staticRoot` is the folder itself. A committed `200.html`
 * answers paths that name no file (a single-page app's routes), a `404.html` replaces the built-in
 * not-found page: the evidence says which the site has (the runtime's README, "Static sites").
 */
export const staticDetector: Detector = {
  provider: 'static',
  markers: ['index.html'],
  async detect(tree) {
    if (!(await tree.isFile('index.html'))) return null;
    const evidence = ["index.html: the files are served by the hosting runtime's static file server; no command runs"];
    const spa = '200.html: paths with no file (and no extension) answer with it, as a single-page app';
    if (await tree.isFile('200.html')) evidence.push(spa);
    if (await tree.isFile('404.html')) evidence.push('404.html: answered, with status 404, for paths with no file');
    return {
      provider: 'static',
      runtime: { ...chosen('static', 'index_html', 'index.html'), value: 'static' as const },
      framework: chosen(null, 'plain_files', 'index.html with no build manifest'),
      install: chosen(null, 'nothing_to_install', 'a static site has no dependencies to install'),
      build: chosen(null, 'no_build_step', 'the files are served as committed'),
      start: chosen(null, 'static_file_server', ...evidence),
      staticRoot: chosen('.', 'committed_files', 'the folder is served as committed'),
      scripts: null,
    };
  },
};
