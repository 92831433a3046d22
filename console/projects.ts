import { useEffect, useState } from 'preact/hooks';
import { api } from './api/client.ts';
import { unwrap } from './api/errors.ts';

/** The names of the projects the caller sees, by id (empty until they come; a failure leaves ids shown). */
export function useProjects(): ReadonlyMap<string, string> {
  const [names, setNames] = useState<ReadonlyMap<string, string>>(new Map());
  useEffect(() => {
    api
      .GET('/projects', { params: { query: { limit: 200 } } })
      .then((result) => setNames(new Map(unwrap(result).data.map((project) => [project.id, project.name]))))
      .catch(() => undefined);
  }, []);
  return names;
}
