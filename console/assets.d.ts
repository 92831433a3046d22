// Stylesheets are imported for esbuild to bundle; they have no value to type.
declare module '*.css';
