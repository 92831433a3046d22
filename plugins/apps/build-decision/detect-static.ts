import { type Detector, chosen } from './detection.ts';

/**
 * A static site: index.html at the folder's top, and no other provider's manifest. It needs no
 * interpreter and runs no command: the hosting runtime's static file server serves the files as
 * they are, which `start.rule` says.
 */
export const staticDetector: Detector = {
  provider: 'static',
  markers: ['index.html'],
  async detect(tree) {
    if (!(await tree.isFile('index.html'))) return null;
    return {
      provider: 'static',
      runtime: { ...chosen('static', 'index_html', 'index.html'), value: 'static' as const },
      framework: chosen(null, 'plain_files', 'index.html with no build manifest'),
      install: chosen(null, 'nothing_to_install', 'a static site has no dependencies to install'),
      build: chosen(null, 'no_build_step', 'the files are served as committed'),
      start: chosen(null, 'static_file_server', "index.html: the files are served by the hosting runtime's static file server; no command runs"),
      scripts: null,
    };
  },
};
